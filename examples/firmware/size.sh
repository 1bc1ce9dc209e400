#!/usr/bin/env bash
# Flash and RAM of the firmware with Relent (uplinks) and of the hand-written baseline that does the
# same uplinks with a fixed-delay loop of 3 attempts, at opt-level "s" with LTO, and the difference:
# what Relent costs. Needs arm-none-eabi-size (Debian: binutils-arm-none-eabi).
set -euo pipefail
cd "$(dirname "$0")"
target_dir="${CARGO_TARGET_DIR:-target}"

for target in thumbv7m-none-eabi thumbv6m-none-eabi; do
  cargo build -q --release --target "$target" --bins
  declare -A flash ram text data bss
  for bin in uplinks baseline; do
    read -r t d b _ < <(arm-none-eabi-size "$target_dir/$target/release/$bin" | tail -n 1)
    text[$bin]=$t; data[$bin]=$d; bss[$bin]=$b
    flash[$bin]=$((t + d)); ram[$bin]=$((d + b))
  done
  echo "$target (opt-level \"s\", LTO):"
  echo "| firmware | text | data | bss | flash (text+data) | RAM (data+bss) |"
  echo "|---|---|---|---|---|---|"
  for bin in uplinks baseline; do
    echo "| $bin | ${text[$bin]} | ${data[$bin]} | ${bss[$bin]} | ${flash[$bin]} | ${ram[$bin]} |"
  done
  echo "| difference (what Relent costs) | | | | $((flash[uplinks] - flash[baseline])) | $((ram[uplinks] - ram[baseline])) |"
  echo
done
