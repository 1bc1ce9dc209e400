#!/usr/bin/env bash
# Flash and RAM of the firmware with Relent and of the hand-written baseline that does the same
# uplinks with a fixed-delay loop of 3 attempts, at opt-level "s" with LTO, and the differences:
# what retry, budget and breaker cost (the goal: at most 4 KiB and 256 bytes), and what the cooldown,
# the duty cycle and the deep-sleep snapshots add. Relent counts 32-bit ticks (the firmware's
# default); the last rows show what retry, budget and breaker would cost with 64-bit ticks.
# Needs arm-none-eabi-size (Debian: binutils-arm-none-eabi).
set -euo pipefail
cd "$(dirname "$0")"
target_dir="${CARGO_TARGET_DIR:-target}"

sizes() { # target binary -> "text data bss"
  arm-none-eabi-size "$target_dir/$1/release/$2" | tail -n 1 | awk '{print $1, $2, $3}'
}

for target in thumbv7m-none-eabi thumbv6m-none-eabi; do
  cargo build -q --release --target "$target" --bin baseline
  read -r bt bd bb < <(sizes "$target" baseline)
  cargo build -q --release --target "$target" --bin uplinks --no-default-features
  read -r wt wd wb < <(sizes "$target" uplinks)
  cargo build -q --release --target "$target" --bin uplinks --no-default-features --features ticks-u32
  read -r rt rd rb < <(sizes "$target" uplinks)
  cargo build -q --release --target "$target" --bin uplinks --no-default-features --features ticks-u32,cooldown
  read -r ct cd cb < <(sizes "$target" uplinks)
  cargo build -q --release --target "$target" --bin uplinks --no-default-features --features ticks-u32,cooldown,duty-cycle
  read -r dt dd db < <(sizes "$target" uplinks)
  cargo build -q --release --target "$target" --bin uplinks
  read -r st sd sb < <(sizes "$target" uplinks)
  echo "$target (opt-level \"s\", LTO):"
  echo "| firmware | text | data | bss | flash (text+data) | RAM (data+bss) |"
  echo "|---|---|---|---|---|---|"
  echo "| baseline (fixed-delay loop, 3 attempts) | $bt | $bd | $bb | $((bt + bd)) | $((bd + bb)) |"
  echo "| Relent: retry, budget, breaker | $rt | $rd | $rb | $((rt + rd)) | $((rd + rb)) |"
  echo "| and a cooldown | $ct | $cd | $cb | $((ct + cd)) | $((cd + cb)) |"
  echo "| and a duty cycle | $dt | $dd | $db | $((dt + dd)) | $((dd + db)) |"
  echo "| and deep-sleep snapshots (the example as it runs) | $st | $sd | $sb | $((st + sd)) | $((sd + sb)) |"
  echo "| what retry, budget and breaker cost | | | | $((rt + rd - bt - bd)) | $((rd + rb - bd - bb)) |"
  echo "| what the cooldown adds | | | | $((ct + cd - rt - rd)) | $((cd + cb - rd - rb)) |"
  echo "| what the duty cycle adds | | | | $((dt + dd - ct - cd)) | $((dd + db - cd - cb)) |"
  echo "| what snapshots add | | | | $((st + sd - dt - dd)) | $((sd + sb - dd - db)) |"
  echo "| Relent: retry, budget, breaker, 64-bit ticks | $wt | $wd | $wb | $((wt + wd)) | $((wd + wb)) |"
  echo "| what retry, budget and breaker cost with 64-bit ticks | | | | $((wt + wd - bt - bd)) | $((wd + wb - bd - bb)) |"
  echo
done
