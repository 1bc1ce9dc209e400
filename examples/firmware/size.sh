#!/usr/bin/env bash
# Flash and RAM of the firmware with Relent and of the hand-written baseline that does the same
# uplinks with a fixed-delay loop of 3 attempts, at opt-level "s" with LTO, and the differences:
# what retry, budget and breaker cost (the goal: at most 4 KiB and 256 bytes of static RAM), and
# what the cooldown, the duty cycle, the quiet profile (a reconfiguration) and the deep-sleep
# snapshots add. Relent counts 32-bit ticks (the
# firmware's default); the last rows show what retry, budget and breaker would cost with 64-bit ticks.
# RAM is `.data + .bss` (statics, the task's future among them); the peak stack is measured by
# running each build on its board in QEMU (cargo's runner, .cargo/config.toml), which prints it.
# Needs arm-none-eabi-size (Debian: binutils-arm-none-eabi) and qemu-system-arm.
set -euo pipefail
cd "$(dirname "$0")"
# Panic messages carry the source path of relent-core and relent-embassy (path dependencies, given
# to rustc as absolute paths), so the checkout's location changed the flash figures by a few bytes.
# Mapped to one prefix, they are the same wherever the checkout is. Cargo joins these flags to
# .cargo/config.toml's.
root=$(cd ../.. && pwd)
export CARGO_TARGET_THUMBV7M_NONE_EABI_RUSTFLAGS="--remap-path-prefix=$root=/relent"
export CARGO_TARGET_THUMBV6M_NONE_EABI_RUSTFLAGS="--remap-path-prefix=$root=/relent"

# Every build is made first, one after another (cargo's lock), and its ELF copied aside; then the
# builds run on their boards, as many at a time as there are cores. With -icount and sleep=off a
# run's guest time, and so its output and its peak stack, come from the instructions it runs alone,
# whatever else the machine does. Each run's output is kept in $SIZE_LOGS (a directory of its own
# otherwise) as NAME.out beside NAME.elf, NAME as `name` gives it; CI checks the example's, as it
# runs, from there.
if [ -n "${SIZE_LOGS:-}" ]; then
  logs=$SIZE_LOGS
  mkdir -p "$logs"
else
  # Fourteen ELFs and their logs: gone when the script ends, unless asked for.
  logs=$(mktemp -d)
  trap 'rm -rf "$logs"' EXIT
fi
name() { # target binary [cargo flags...] -> the run's name: uplinks-nodefault-ticks-u32-thumbv7m-none-eabi
  local target=$1 bin=$2
  shift 2
  local flags="$*"
  flags=${flags//--no-default-features/nodefault}
  flags=${flags//--features /}
  flags=${flags// /-}
  echo "$bin${flags:+-$flags}-$target"
}
declare -A elf target_of
order=()
build() { # target binary [cargo flags...]
  local target=$1 bin=$2 n
  n=$(name "$@")
  shift 2
  local built
  built=$(cargo build -q --release --target "$target" --bin "$bin" "$@" --message-format=json |
    sed -nE 's/.*"executable":"([^"]+)".*/\1/p')
  test -n "$built"
  # The next feature set's build replaces it: a copy of its own.
  elf[$n]="$logs/$n.elf"
  cp "$built" "${elf[$n]}"
  target_of[$n]=$target
  order+=("$n")
}
# The runner .cargo/config.toml gives a target, read from there so that the two stay one.
runner() { sed -nE "/^\[target\.$1\]/,/^\[/ s/^runner = \"(.*)\"$/\1/p" .cargo/config.toml; }
run() { # name
  local n=$1 command
  command=$(runner "${target_of[$n]}")
  test -n "$command"
  # shellcheck disable=SC2086 # the runner is a command and its arguments
  timeout 600 $command "${elf[$n]}" > "$logs/$n.out" 2>&1 || touch "$logs/$n.failed"
}
measure() { # target binary [cargo flags...] -> "text data bss peak-stack"
  local n peak
  n=$(name "$@")
  peak=$(sed -nE 's/^RAM: .* peak stack ([0-9]+) bytes.*$/\1/p' "$logs/$n.out" | sort -n | tail -n 1)
  echo "$(arm-none-eabi-size "${elf[$n]}" | tail -n 1 | awk '{print $1, $2, $3}') $peak"
}

for target in thumbv7m-none-eabi thumbv6m-none-eabi; do
  build "$target" baseline
  build "$target" uplinks --no-default-features
  build "$target" uplinks --no-default-features --features ticks-u32
  build "$target" uplinks --no-default-features --features ticks-u32,cooldown
  build "$target" uplinks --no-default-features --features ticks-u32,cooldown,duty-cycle
  build "$target" uplinks --no-default-features --features ticks-u32,cooldown,duty-cycle,quiet-profile
  build "$target" uplinks
done
rm -f "$logs"/*.failed
cores=$(nproc)
for n in "${order[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$cores" ]; do wait -n || true; done
  run "$n" &
done
wait
for n in "${order[@]}"; do
  # A run that printed no RAM line would read below as a peak stack of 0.
  if [ -e "$logs/$n.failed" ] || ! grep -q "^RAM: " "$logs/$n.out"; then
    echo "$n failed on ${target_of[$n]}:" >&2
    cat "$logs/$n.out" >&2
    exit 1
  fi
done

for target in thumbv7m-none-eabi thumbv6m-none-eabi; do
  read -r bt bd bb bs < <(measure "$target" baseline)
  read -r wt wd wb ws < <(measure "$target" uplinks --no-default-features)
  read -r rt rd rb rs < <(measure "$target" uplinks --no-default-features --features ticks-u32)
  read -r ct cd cb cs < <(measure "$target" uplinks --no-default-features --features ticks-u32,cooldown)
  read -r dt dd db ds < <(measure "$target" uplinks --no-default-features --features ticks-u32,cooldown,duty-cycle)
  read -r qt qd qb qs < <(measure "$target" uplinks --no-default-features --features ticks-u32,cooldown,duty-cycle,quiet-profile)
  read -r st sd sb ss < <(measure "$target" uplinks)
  echo "$target (opt-level \"s\", LTO):"
  echo "| firmware | text | data | bss | flash (text+data) | RAM (data+bss) | peak stack |"
  echo "|---|---|---|---|---|---|---|"
  echo "| baseline (fixed-delay loop, 3 attempts) | $bt | $bd | $bb | $((bt + bd)) | $((bd + bb)) | $bs |"
  echo "| Relent: retry, budget, breaker | $rt | $rd | $rb | $((rt + rd)) | $((rd + rb)) | $rs |"
  echo "| and a cooldown | $ct | $cd | $cb | $((ct + cd)) | $((cd + cb)) | $cs |"
  echo "| and a duty cycle | $dt | $dd | $db | $((dt + dd)) | $((dd + db)) | $ds |"
  echo "| and the quiet profile (a reconfiguration) | $qt | $qd | $qb | $((qt + qd)) | $((qd + qb)) | $qs |"
  echo "| and deep-sleep snapshots (the example as it runs) | $st | $sd | $sb | $((st + sd)) | $((sd + sb)) | $ss |"
  echo "| what retry, budget and breaker cost | | | | $((rt + rd - bt - bd)) | $((rd + rb - bd - bb)) | $((rs - bs)) |"
  echo "| what the cooldown adds | | | | $((ct + cd - rt - rd)) | $((cd + cb - rd - rb)) | $((cs - rs)) |"
  echo "| what the duty cycle adds | | | | $((dt + dd - ct - cd)) | $((dd + db - cd - cb)) | $((ds - cs)) |"
  echo "| what the quiet profile adds | | | | $((qt + qd - dt - dd)) | $((qd + qb - dd - db)) | $((qs - ds)) |"
  echo "| what snapshots add | | | | $((st + sd - qt - qd)) | $((sd + sb - qd - qb)) | $((ss - qs)) |"
  echo "| Relent: retry, budget, breaker, 64-bit ticks | $wt | $wd | $wb | $((wt + wd)) | $((wd + wb)) | $ws |"
  echo "| what retry, budget and breaker cost with 64-bit ticks | | | | $((wt + wd - bt - bd)) | $((wd + wb - bd - bb)) | $((ws - bs)) |"
  echo
done
