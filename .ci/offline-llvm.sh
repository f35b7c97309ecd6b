#!/bin/sh
# Installs LLVM for CubeCL's LLVM-based runtimes (the `cpu`, `cuda` and `hip` features) without
# network access beyond the Debian package mirrors.
#
# Why: cubecl-llvm links LLVM through the `tracel-llvm-bundler` crate, whose build script
# downloads a prebuilt LLVM archive from GitHub into a per-user folder. A machine that only
# reaches package registries fails there. The bundler skips the download when its per-user
# folder already carries its "installed" marker, and then only asks `<folder>/bin/llvm-config`
# for compiler and linker flags. So we install Debian's LLVM, put a small `llvm-config` in that
# folder that forwards to Debian's, and create the marker.
#
# Usage: run as root with HOME set to the user who builds (.ci/run does this):
#   sh .ci/offline-llvm.sh
# Safe to run again: installed packages and an existing folder are reused.
# Settings (environment): LLVM_VERSION (Debian's LLVM major version, default 22),
# LLVM_PREFIX (where that LLVM lives, default /usr/lib/llvm-$LLVM_VERSION).
set -eu

LLVM_VERSION=${LLVM_VERSION:-22}
LLVM_PREFIX=${LLVM_PREFIX:-/usr/lib/llvm-$LLVM_VERSION}

# 1. The bundler's version names its folder, so read the version this checkout builds with
#    from Cargo.lock (the entry after `name = "tracel-llvm-bundler"`), rather than pinning it
#    here and silently going stale when CubeCL is upgraded.
LOCK="$(dirname "$0")/../Cargo.lock"
BUNDLER_VERSION=$(sed -n '/^name = "tracel-llvm-bundler"$/{n;s/^version = "\(.*\)"$/\1/p;}' "$LOCK")
if [ -z "$BUNDLER_VERSION" ]; then
  echo "offline-llvm: no tracel-llvm-bundler in $LOCK: nothing here builds CubeCL's LLVM" >&2
  exit 1
fi

# 2. Debian's LLVM, only if its llvm-config is not there yet:
#    - llvm-N-dev: headers, static LLVM libraries and llvm-config (the bundler links static);
#    - libpolly-N-dev: Debian builds LLVM with Polly linked in, so a static link of its LLVM
#      libraries needs Polly's as well;
#    - liblld-N-dev: the hip runtime links AMD GPU code in-process with LLD (cubecl-llvm
#      links the static lldELF and lldCommon);
#    - libzstd-dev: LLVM's compression support, listed by `llvm-config --system-libs`.
if [ ! -x "$LLVM_PREFIX/bin/llvm-config" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "llvm-$LLVM_VERSION-dev" "libpolly-$LLVM_VERSION-dev" \
    "liblld-$LLVM_VERSION-dev" libzstd-dev >/dev/null
fi

# 3. The bundler's per-user folder: the `dirs` crate's data_local_dir on Linux
#    ($XDG_DATA_HOME, else ~/.local/share), then tracel/tracel-llvm-<bundler version>.
FOLDER="${XDG_DATA_HOME:-$HOME/.local/share}/tracel/tracel-llvm-$BUNDLER_VERSION"
mkdir -p "$FOLDER/bin"

# 4. Its llvm-config: forwards every argument to Debian's. One rewrite: Debian's
#    `--system-libs` may name a library by its full path (/usr/lib/.../libz3.so.4), and the
#    bundler turns a path into the file's stem (`libz3`), which the linker cannot find. The
#    wrapper hands such a path over as `-lz3` instead.
cat >"$FOLDER/bin/llvm-config" <<EOF
#!/bin/sh
# Written by .ci/offline-llvm.sh: Debian's llvm-config, full library paths as -l flags.
"$LLVM_PREFIX/bin/llvm-config" "\$@" | sed -e 's#/[^ ]*/lib\([A-Za-z0-9_+-]*\)\.so\(\.[0-9]*\)*#-l\1#g'
EOF
chmod +x "$FOLDER/bin/llvm-config"

# 5. The marker the bundler checks before downloading (`.tracel-llvm-installed`).
touch "$FOLDER/.tracel-llvm-installed"
echo "offline-llvm: $FOLDER forwards to $LLVM_PREFIX"
