#!/usr/bin/env bash
# Flash and RAM of the firmware with Relent and of the hand-written baseline that does the same
# uplinks with a fixed-delay loop of 3 attempts, at opt-level "s" with LTO, and the differences:
# what retry, budget and breaker cost (the goal: at most 4 KiB and 256 bytes of static RAM), and
# what the cooldown, the duty cycle and the deep-sleep snapshots add. Relent counts 32-bit ticks (the
# firmware's default); the last rows show what retry, budget and breaker would cost with 64-bit ticks.
# RAM is `.data + .bss` (statics, the task's future among them); the peak stack is measured by
# running each build on its board in QEMU (cargo's runner, .cargo/config.toml), which prints it.
# Needs arm-none-eabi-size (Debian: binutils-arm-none-eabi) and qemu-system-arm.
set -euo pipefail
cd "$(dirname "$0")"
target_dir="${CARGO_TARGET_DIR:-target}"
# Panic messages carry the source path of relent-core and relent-embassy (path dependencies, given
# to rustc as absolute paths), so the checkout's location changed the flash figures by a few bytes.
# Mapped to one prefix, they are the same wherever the checkout is. Cargo joins these flags to
# .cargo/config.toml's.
root=$(cd ../.. && pwd)
export CARGO_TARGET_THUMBV7M_NONE_EABI_RUSTFLAGS="--remap-path-prefix=$root=/relent"
export CARGO_TARGET_THUMBV6M_NONE_EABI_RUSTFLAGS="--remap-path-prefix=$root=/relent"

measure() { # target binary [cargo flags...] -> "text data bss peak-stack"
  local target=$1 bin=$2
  shift 2
  local out
  out=$(cargo run -q --release --target "$target" --bin "$bin" "$@" 2>&1) || {
    echo "$bin $* failed on $target:" >&2
    echo "$out" >&2
    exit 1
  }
  local peak
  peak=$(sed -nE 's/^RAM: .* peak stack ([0-9]+) bytes.*$/\1/p' <<<"$out" | sort -n | tail -n 1)
  echo "$(arm-none-eabi-size "$target_dir/$target/release/$bin" | tail -n 1 | awk '{print $1, $2, $3}') $peak"
}

for target in thumbv7m-none-eabi thumbv6m-none-eabi; do
  read -r bt bd bb bs < <(measure "$target" baseline)
  read -r wt wd wb ws < <(measure "$target" uplinks --no-default-features)
  read -r rt rd rb rs < <(measure "$target" uplinks --no-default-features --features ticks-u32)
  read -r ct cd cb cs < <(measure "$target" uplinks --no-default-features --features ticks-u32,cooldown)
  read -r dt dd db ds < <(measure "$target" uplinks --no-default-features --features ticks-u32,cooldown,duty-cycle)
  read -r st sd sb ss < <(measure "$target" uplinks)
  echo "$target (opt-level \"s\", LTO):"
  echo "| firmware | text | data | bss | flash (text+data) | RAM (data+bss) | peak stack |"
  echo "|---|---|---|---|---|---|---|"
  echo "| baseline (fixed-delay loop, 3 attempts) | $bt | $bd | $bb | $((bt + bd)) | $((bd + bb)) | $bs |"
  echo "| Relent: retry, budget, breaker | $rt | $rd | $rb | $((rt + rd)) | $((rd + rb)) | $rs |"
  echo "| and a cooldown | $ct | $cd | $cb | $((ct + cd)) | $((cd + cb)) | $cs |"
  echo "| and a duty cycle | $dt | $dd | $db | $((dt + dd)) | $((dd + db)) | $ds |"
  echo "| and deep-sleep snapshots (the example as it runs) | $st | $sd | $sb | $((st + sd)) | $((sd + sb)) | $ss |"
  echo "| what retry, budget and breaker cost | | | | $((rt + rd - bt - bd)) | $((rd + rb - bd - bb)) | $((rs - bs)) |"
  echo "| what the cooldown adds | | | | $((ct + cd - rt - rd)) | $((cd + cb - rd - rb)) | $((cs - rs)) |"
  echo "| what the duty cycle adds | | | | $((dt + dd - ct - cd)) | $((dd + db - cd - cb)) | $((ds - cs)) |"
  echo "| what snapshots add | | | | $((st + sd - dt - dd)) | $((sd + sb - dd - db)) | $((ss - ds)) |"
  echo "| Relent: retry, budget, breaker, 64-bit ticks | $wt | $wd | $wb | $((wt + wd)) | $((wd + wb)) | $ws |"
  echo "| what retry, budget and breaker cost with 64-bit ticks | | | | $((wt + wd - bt - bd)) | $((wd + wb - bd - bb)) | $((ws - bs)) |"
  echo
done
