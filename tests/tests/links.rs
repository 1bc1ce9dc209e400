//! Every link in the project's Markdown leads somewhere, and every file and cargo target it names
//! exists.
//!
//! - Each library crate's README is its page on crates.io and, through
//!   `#![doc = include_str!("../README.md")]`, its front page on docs.rs. Neither site has the
//!   workspace around it, and the crates name no repository to resolve relative links against, so a
//!   link such as `../README.md` would lead nowhere. Links in them are absolute (`https://...`) or
//!   anchors within the page, and they name the workspace README's sections in words, which must
//!   still be its sections' names.
//! - The workspace README and `docs/` are read in the repository, where a relative link is a file:
//!   each must exist, and an anchor must be a heading of the page it points into.
//! - Every page gives commands to run and names files to read: a package (`-p relent-tokio`), a
//!   bench, binary, test or example of it (`--bench overhead`), a path in backticks
//!   (`` `std-adapter/tests/alloc.rs` ``). A rename leaves them behind unless something checks.

use std::path::{Path, PathBuf};

/// The three published crates' READMEs, by crate.
const CRATE_READMES: [(&str, &str); 3] = [
    ("relent-core", include_str!("../../core/README.md")),
    ("relent-tokio", include_str!("../../std-adapter/README.md")),
    ("relent-embassy", include_str!("../../embassy-adapter/README.md")),
];

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Markdown read in the repository: the workspace README and every file in `docs/`, as paths
/// from the root.
fn repository_pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is there")
        .map(|entry| PathBuf::from("docs").join(entry.expect("a readable entry").file_name()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn read(page: &Path) -> String {
    std::fs::read_to_string(root().join(page)).unwrap_or_else(|e| panic!("{}: {e}", page.display()))
}

/// The targets of the inline Markdown links and images in `text` (`[text](target)`,
/// `![alt](target)`), with their line numbers. Intra-doc links (`` [`RetryPolicy`] ``) have no
/// target here and are not listed: rustdoc resolves them.
fn link_targets(text: &str) -> Vec<(usize, &str)> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            found.push((index + 1, &after[..end]));
            rest = &after[end..];
        }
    }
    found
}

fn stands_alone(target: &str) -> bool {
    target.starts_with("https://") || target.starts_with('#')
}

/// The headings of a Markdown page (outside code blocks), as written.
fn headings(text: &str) -> Vec<&str> {
    let mut in_code = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            found.push(line.trim_start_matches('#').trim());
        }
    }
    found
}

/// A heading's anchor as GitHub makes it: lower case, spaces to hyphens, and every other
/// character but letters, digits, `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The workspace README's sections that `text` names in words: a quoted name after `README's` or
/// `section`, with line breaks inside it read as spaces.
fn sections_named(text: &str) -> Vec<String> {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut found = Vec::new();
    for marker in ["README's \"", "section \""] {
        let mut rest = flat.as_str();
        while let Some(at) = rest.find(marker) {
            let after = &rest[at + marker.len()..];
            let end = after.find('"').unwrap_or(after.len());
            found.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn crate_readmes_link_only_to_absolute_addresses_or_anchors() {
    let mut broken = Vec::new();
    for (krate, readme) in CRATE_READMES {
        for (line, target) in link_targets(readme) {
            if !stands_alone(target) {
                broken.push(format!("{krate}'s README, line {line}: ({target})"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links that would be broken on crates.io and docs.rs; use an https:// address, or name the \
         workspace README's section in words:\n{}",
        broken.join("\n")
    );
}

#[test]
fn sections_named_in_words_are_sections_of_the_workspace_readme() {
    let readme = read(Path::new("README.md"));
    let sections = headings(&readme);
    let mut pages: Vec<(String, String)> =
        CRATE_READMES.iter().map(|(krate, text)| (format!("{krate}'s README"), (*text).to_owned())).collect();
    pages
        .extend(repository_pages().into_iter().skip(1).map(|page| (page.display().to_string(), read(&page))));
    let mut named = 0;
    let mut missing = Vec::new();
    for (page, text) in &pages {
        for section in sections_named(text) {
            named += 1;
            if !sections.contains(&section.as_str()) {
                missing.push(format!("{page}: \"{section}\""));
            }
        }
    }
    assert!(named >= 5, "the scan found {named} named sections; the pages name at least 5");
    assert!(
        missing.is_empty(),
        "sections named that the workspace README does not have (renamed or moved?):\n{}",
        missing.join("\n")
    );
}

#[test]
fn relative_links_in_the_repository_lead_to_files_and_headings_that_exist() {
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in repository_pages() {
        let text = read(&page);
        let dir = page.parent().unwrap_or(Path::new(""));
        for (line, target) in link_targets(&text) {
            if target.starts_with("https://") {
                continue;
            }
            checked += 1;
            let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
            let into = if file.is_empty() { page.clone() } else { dir.join(file) };
            let place = format!("{}, line {line}: ({target})", page.display());
            if !root().join(&into).exists() {
                broken.push(format!("{place}: no file {}", into.display()));
            } else if !fragment.is_empty() {
                let anchors: Vec<String> = headings(&read(&into)).into_iter().map(anchor).collect();
                if !anchors.iter().any(|a| a == fragment) {
                    broken.push(format!("{place}: no heading with that anchor in {}", into.display()));
                }
            }
        }
    }
    assert!(checked >= 10, "the scan found {checked} relative links; the README alone has more");
    assert!(broken.is_empty(), "links that lead nowhere:\n{}", broken.join("\n"));
}

#[test]
fn the_link_scanner_finds_relative_links() {
    let text = "See [Relent](../README.md) and [core](https://docs.rs/relent-core).\n\
                [`Operation`] and [up](#cargo-features), then [there](./x.md#y). ![plot](e/a.svg)";
    let targets = link_targets(text);
    assert_eq!(
        targets,
        [
            (1, "../README.md"),
            (1, "https://docs.rs/relent-core"),
            (2, "#cargo-features"),
            (2, "./x.md#y"),
            (2, "e/a.svg")
        ]
    );
    let kept: Vec<bool> = targets.iter().map(|(_, t)| stands_alone(t)).collect();
    assert_eq!(kept, [false, true, true, false, false]);
}

#[test]
fn anchors_and_named_sections_are_read_as_github_and_the_pages_write_them() {
    assert_eq!(anchor("On a server: relent-tokio"), "on-a-server-relent-tokio");
    assert_eq!(anchor("Duty cycle: attempts that cost airtime"), "duty-cycle-attempts-that-cost-airtime");
    assert_eq!(
        anchor("Beside the crates users would pick instead"),
        "beside-the-crates-users-would-pick-instead"
    );
    assert_eq!(headings("# A\ntext\n```sh\n# a comment\n```\n### B: c"), ["A", "B: c"]);
    let text = "the workspace README's \"Fuzzing and\n miri\" section, and in its section \"On firmware:\nrelent-embassy\"";
    assert_eq!(sections_named(text), ["Fuzzing and miri", "On firmware: relent-embassy"]);
}

/// The crates of this repository, by package name, with their folders: the workspace's members and
/// the standalone crates it excludes (the firmware example, the fuzz target, the no-panic check).
fn packages() -> Vec<(String, PathBuf)> {
    let workspace = read(Path::new("Cargo.toml"));
    let mut dirs = Vec::new();
    for key in ["members = [", "exclude = ["] {
        let list = workspace.split_once(key).and_then(|(_, rest)| rest.split_once(']')).expect(key).0;
        dirs.extend(
            list.split(',').map(|d| d.trim().trim_matches('"')).filter(|d| !d.is_empty()).map(PathBuf::from),
        );
    }
    dirs.into_iter()
        .map(|dir| {
            let manifest = read(&dir.join("Cargo.toml"));
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = \""))
                .and_then(|l| l.strip_suffix('"'))
                .unwrap_or_else(|| panic!("{}: no package name", dir.display()));
            (name.to_owned(), dir)
        })
        .collect()
}

/// Whether the crate in `dir` has a target of `kind` (`bin`, `bench`, `test`, `example`) named
/// `name`: a file where cargo finds one, or a `[[kind]]` section of that name.
fn has_target(dir: &Path, kind: &str, name: &str) -> bool {
    let folder = match kind {
        "bin" => "src/bin",
        "bench" => "benches",
        "test" => "tests",
        _ => "examples",
    };
    let manifest = read(&dir.join("Cargo.toml"));
    root().join(dir).join(folder).join(format!("{name}.rs")).exists()
        || root().join(dir).join(folder).join(name).join("main.rs").exists()
        || manifest.contains(&format!("[[{kind}]]\nname = \"{name}\""))
}

/// A word of a command as written in prose: what is inside its backticks, without the sentence's
/// punctuation around it (`` `--bin checkout`. `` gives `checkout`).
fn word(w: &str) -> &str {
    w.split('`').find(|piece| !piece.is_empty()).unwrap_or("").trim_matches(|c| ",;:.()".contains(c))
}

/// How many packages, targets and paths `text` names (packages and their targets in `cargo`
/// commands, paths in backticks that start with one of the repository's folders), and those that
/// do not exist.
fn named_but_missing(text: &str, packages: &[(String, PathBuf)]) -> (usize, Vec<String>) {
    let folders = [
        "core/",
        "std-adapter/",
        "embassy-adapter/",
        "tests/",
        "examples/",
        "adapter-bench/",
        "fuzz/",
        "docs/",
        "evidence/",
        ".ci/",
    ];
    let (mut checked, mut missing) = (0, Vec::new());
    let lines: Vec<&str> = text.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        let line_no = index + 1;
        for (at, _) in line.match_indices("cargo ") {
            // A command in prose is in backticks and may wrap onto the next line: then it runs on
            // to the backtick there.
            let mut command = line[at..].to_owned();
            let in_code = line[..at].matches('`').count() % 2 == 1;
            if in_code && !command.contains('`') {
                let next = lines.get(index + 1).copied().unwrap_or("");
                command = format!("{command} {}", next.split('`').next().unwrap_or(""));
            }
            let words: Vec<&str> =
                command.split('`').next().unwrap_or("").split_whitespace().map(word).collect();
            let mut named = Vec::new();
            for pair in words.windows(2) {
                let [flag, value] = pair else { continue };
                if value.starts_with('-') {
                    continue;
                }
                if *flag == "-p" {
                    checked += 1;
                    match packages.iter().find(|(name, _)| name == value) {
                        Some((_, dir)) => named.push(dir.clone()),
                        None => missing.push(format!("line {line_no}: no package {value}")),
                    }
                }
            }
            for pair in words.windows(2) {
                let [flag, value] = pair else { continue };
                let Some(kind) =
                    flag.strip_prefix("--").filter(|k| ["bin", "bench", "test", "example"].contains(k))
                else {
                    continue;
                };
                let dirs: Vec<&Path> = if named.is_empty() {
                    packages.iter().map(|(_, dir)| dir.as_path()).collect()
                } else {
                    named.iter().map(PathBuf::as_path).collect()
                };
                checked += 1;
                if !dirs.iter().any(|dir| has_target(dir, kind, value)) {
                    missing.push(format!("line {line_no}: no {kind} {value}"));
                }
            }
        }
        for (i, span) in line.split('`').enumerate() {
            let is_path = i % 2 == 1
                && folders.iter().any(|f| span.starts_with(f))
                && span.chars().all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
            checked += usize::from(is_path);
            if is_path && !root().join(span).exists() {
                missing.push(format!("line {line_no}: no file {span}"));
            }
        }
    }
    (checked, missing)
}

#[test]
fn files_and_cargo_targets_the_pages_name_exist() {
    let packages = packages();
    assert!(packages.len() >= 9, "the workspace's crates and the three standalone ones: {packages:?}");
    let pages = repository_pages()
        .into_iter()
        .chain(["core/README.md", "std-adapter/README.md", "embassy-adapter/README.md"].map(PathBuf::from));
    let (mut checked, mut missing) = (0, Vec::new());
    for page in pages {
        let (count, on_page) = named_but_missing(&read(&page), &packages);
        checked += count;
        missing.extend(on_page.into_iter().map(|m| format!("{}, {m}", page.display())));
    }
    assert!(checked >= 90, "the scan found {checked} names; the pages named 99 when this was written");
    assert!(missing.is_empty(), "the docs name what is not there:\n{}", missing.join("\n"));
}

#[test]
fn the_command_and_path_scanner_finds_what_is_missing() {
    let packages = packages();
    let text = "Run `cargo bench -p relent-tokio --bench overhead` and `cargo run -p relent-examples --bin checkout`.\n\
                `cargo bench -p relent-tokio --bench overheads`, `cargo test -p relent-tokyo`, `cargo run --bin nowhere`\n\
                read `std-adapter/tests/alloc.rs`, not `std-adapter/tests/allocs.rs`; `cargo test --workspace`\n\
                and the wrapped `cargo bench -p relent-adapter-bench --bench\n\
                productions` too.";
    let (checked, missing) = named_but_missing(text, &packages);
    assert_eq!(
        (checked, missing.iter().map(String::as_str).collect::<Vec<_>>()),
        (
            12,
            vec![
                "line 2: no bench overheads",
                "line 2: no package relent-tokyo",
                "line 2: no bin nowhere",
                "line 3: no file std-adapter/tests/allocs.rs",
                "line 4: no bench productions"
            ]
        )
    );
}
