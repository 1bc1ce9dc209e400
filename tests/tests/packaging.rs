//! What the published crates carry must stand on its own. Each library crate's README is its page
//! on crates.io and, through `#![doc = include_str!("../README.md")]`, its front page on docs.rs.
//! Neither site has the workspace around it, and the crates name no repository to resolve relative
//! links against, so a link such as `../README.md` would lead nowhere. Links in them are absolute
//! (`https://...`) or anchors within the page.

/// The three published crates' READMEs, by crate.
const CRATE_READMES: [(&str, &str); 3] = [
    ("relent-core", include_str!("../../core/README.md")),
    ("relent-tokio", include_str!("../../std-adapter/README.md")),
    ("relent-embassy", include_str!("../../embassy-adapter/README.md")),
];

/// The targets of the inline Markdown links in `text` (`[text](target)`), with their line numbers.
/// Intra-doc links (`` [`RetryPolicy`] ``) have no target here and are not listed: rustdoc
/// resolves them.
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
fn the_link_scanner_finds_relative_links() {
    let text = "See [Relent](../README.md) and [core](https://docs.rs/relent-core).\n\
                [`Operation`] and [up](#cargo-features), then [there](./x.md#y).";
    let targets = link_targets(text);
    assert_eq!(
        targets,
        [(1, "../README.md"), (1, "https://docs.rs/relent-core"), (2, "#cargo-features"), (2, "./x.md#y")]
    );
    let kept: Vec<bool> = targets.iter().map(|(_, t)| stands_alone(t)).collect();
    assert_eq!(kept, [false, true, true, false]);
}
