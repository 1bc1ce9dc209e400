#!/usr/bin/env bash
# Flash and RAM of the firmware with Relent and of the hand-written baseline that does the same
# uplinks with a fixed-delay loop of 3 attempts, at opt-level "s" with LTO, and the differences:
# what Relent costs (retry, budget, breaker, cooldown), and what the duty cycle and the deep-sleep
# snapshots add.
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
  read -r rt rd rb < <(sizes "$target" uplinks)
  cargo build -q --release --target "$target" --bin uplinks --no-default-features --features duty-cycle
  read -r dt dd db < <(sizes "$target" uplinks)
  cargo build -q --release --target "$target" --bin uplinks
  read -r st sd sb < <(sizes "$target" uplinks)
  echo "$target (opt-level \"s\", LTO):"
  echo "| firmware | text | data | bss | flash (text+data) | RAM (data+bss) |"
  echo "|---|---|---|---|---|---|"
  echo "| baseline (fixed-delay loop, 3 attempts) | $bt | $bd | $bb | $((bt + bd)) | $((bd + bb)) |"
  echo "| Relent (retry, budget, breaker, cooldown) | $rt | $rd | $rb | $((rt + rd)) | $((rd + rb)) |"
  echo "| Relent with a duty cycle | $dt | $dd | $db | $((dt + dd)) | $((dd + db)) |"
  echo "| Relent with a duty cycle and deep-sleep snapshots | $st | $sd | $sb | $((st + sd)) | $((sd + sb)) |"
  echo "| what Relent costs | | | | $((rt + rd - bt - bd)) | $((rd + rb - bd - bb)) |"
  echo "| what the duty cycle adds | | | | $((dt + dd - rt - rd)) | $((dd + db - rd - rb)) |"
  echo "| what snapshots add | | | | $((st + sd - dt - dd)) | $((sd + sb - dd - db)) |"
  echo
done
