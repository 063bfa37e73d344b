#!/bin/sh
# Install hermes-tray for the current user only; no root, nothing outside $HOME.
#
#   ./install.sh [--autostart] [--force]
#
#   ~/.local/opt/hermes-tray/                  the app (replaced as a whole on re-install)
#   ~/.local/bin/hermes-tray                   command link
#   ~/.local/share/applications/hermes-tray.desktop
#   ~/.local/share/icons/hicolor/*/apps/hermes-tray.{png,svg}
#   --autostart: also start the tray at login (same as `hermes-tray autostart on`)
#   --force:     replace a ~/.local/bin/hermes-tray that points elsewhere (e.g. a pipx install)
#
# Safe to run again (upgrade or repair). Remove with ~/.local/opt/hermes-tray/uninstall.sh.
set -eu

APP=hermes-tray
MARKER=.hermes-tray-install

die() {
    printf 'install.sh: %s\n' "$*" >&2
    exit 1
}
say() {
    printf '%s\n' "$*"
}

autostart=no
force=no
for arg in "$@"; do
    case $arg in
        --autostart) autostart=yes ;;
        --force) force=yes ;;
        -h | --help)
            sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *) die "unknown option: $arg (see --help)" ;;
    esac
done

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd -P) || die "cannot find my own folder"
[ -x "$here/$APP/$APP" ] || die "no $APP/$APP beside this script: run it from the unpacked tarball"

# Per-user means *this* user: refuse a HOME that belongs to someone else (sudo without -H …).
[ -n "${HOME:-}" ] || die "HOME is not set"
case $HOME in
    /*) ;;
    *) die "HOME is not an absolute path: $HOME" ;;
esac
[ -d "$HOME" ] || die "HOME is not a folder: $HOME"
# shellcheck disable=SC2012 # `ls -n` is the POSIX way to read a folder's owner uid (stat is not POSIX)
home_owner=$(ls -ldnL -- "$HOME" | awk '{ print $3 }')
me=$(id -u)
[ "$home_owner" = "$me" ] || die "HOME ($HOME) belongs to uid $home_owner, not to you (uid $me); run this as that user, not through sudo"

data_home=${XDG_DATA_HOME:-}
case $data_home in
    /*) ;;
    *) data_home=$HOME/.local/share ;;
esac
opt_parent=$HOME/.local/opt
opt_dir=$opt_parent/$APP
bin_dir=$HOME/.local/bin
apps_dir=$data_home/applications
icons_dir=$data_home/icons/hicolor
exe=$opt_dir/$APP

# Never rm -rf a folder that is not ours.
if [ -e "$opt_dir" ] && [ ! -f "$opt_dir/$MARKER" ]; then
    die "$opt_dir exists and was not made by this installer; move it away first"
fi

# 1. The app: copy beside the old one, then swap, so a failed copy leaves the old one working.
mkdir -p -- "$opt_parent"
staging=$opt_parent/.$APP.new.$$
old=$opt_parent/.$APP.old.$$
trap 'rm -rf -- "$staging" "$old"' EXIT
trap 'exit 1' HUP INT TERM
rm -rf -- "$staging"
cp -RP -- "$here/$APP" "$staging"
cp -- "$here/uninstall.sh" "$staging/uninstall.sh"
chmod -R u+rwX,go+rX,go-w -- "$staging"
chmod 755 -- "$staging/uninstall.sh"
# Refuse a build that cannot run here (e.g. built on a newer glibc) before touching a working install.
if ! check=$("$staging/$APP" --version 2>&1); then
    die "this build does not run on this system, nothing changed: $check"
fi
: >"$staging/$MARKER"
chmod 644 -- "$staging/$MARKER"
if [ -e "$opt_dir" ]; then
    mv -- "$opt_dir" "$old"
fi
mv -- "$staging" "$opt_dir"
rm -rf -- "$old"

# 2. Command link, unless something else owns the name.
mkdir -p -- "$bin_dir"
link=$bin_dir/$APP
if [ -L "$link" ] || [ -e "$link" ]; then
    current=$(readlink -- "$link" 2>/dev/null || true)
    if [ "$current" != "$exe" ] && [ -e "$link" ] && [ "$force" != yes ]; then
        say "note: $link already exists (-> ${current:-a file}); left alone. Use --force to replace it."
        link=
    fi
fi
if [ -n "$link" ]; then
    ln -s -- "$exe" "$link.new.$$"
    mv -f -- "$link.new.$$" "$link"
fi

# 3. Menu entry: Exec/TryExec carry the absolute path (a desktop session may not have ~/.local/bin on PATH).
# Desktop Entry quoting: the argument in double quotes with \ " ` $ escaped, then every \ doubled.
quoted_exe=$(printf '%s' "$exe" | sed -e 's/[\\"`$]/\\&/g' -e 's/\\/\\\\/g' -e 's/%/%%/g')
plain_exe=$(printf '%s' "$exe" | sed -e 's/\\/\\\\/g')
mkdir -p -- "$apps_dir"
desktop=$apps_dir/$APP.desktop
while IFS= read -r line || [ -n "$line" ]; do
    case $line in
        Exec=@EXEC@) printf 'Exec="%s"\n' "$quoted_exe" ;;
        TryExec=@TRYEXEC@) printf 'TryExec=%s\n' "$plain_exe" ;;
        *) printf '%s\n' "$line" ;;
    esac
done <"$here/share/applications/$APP.desktop.in" >"$desktop.new.$$"
chmod 644 -- "$desktop.new.$$"
mv -f -- "$desktop.new.$$" "$desktop"

# 4. Icons into the user's hicolor theme; remembered for the uninstaller.
manifest=$opt_dir/installed-files
printf '%s\n' "$desktop" >"$manifest"
if [ -n "$link" ]; then
    printf '%s\n' "$link" >>"$manifest"
fi
if [ -d "$here/share/icons/hicolor" ]; then
    (cd -- "$here/share/icons/hicolor" && find . -type f) | while IFS= read -r rel; do
        rel=${rel#./}
        mkdir -p -- "$icons_dir/$(dirname -- "$rel")"
        cp -- "$here/share/icons/hicolor/$rel" "$icons_dir/$rel"
        chmod 644 -- "$icons_dir/$rel"
        printf '%s\n' "$icons_dir/$rel" >>"$manifest"
    done
    touch -- "$icons_dir" 2>/dev/null || true
    if [ -f "$icons_dir/icon-theme.cache" ] && command -v gtk-update-icon-cache >/dev/null 2>&1; then
        gtk-update-icon-cache -q -t -f -- "$icons_dir" 2>/dev/null || true
    fi
fi
chmod 644 -- "$manifest"

# 5. Optional start at login, through the app itself (one implementation, read back from the system).
if [ "$autostart" = yes ]; then
    "$exe" autostart on
fi

version=$("$exe" --version 2>/dev/null || echo "$APP")
say "installed $version in $opt_dir"
case ":${PATH:-}:" in
    *":$bin_dir:"*) ;;
    *) say "note: $bin_dir is not on your PATH; run $exe or add it to PATH" ;;
esac
say "remove it with: $opt_dir/uninstall.sh"
