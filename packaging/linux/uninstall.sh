#!/bin/sh
# Remove a per-user hermes-tray installed by install.sh.
#
#   ~/.local/opt/hermes-tray/uninstall.sh [--purge]
#
# Removes the app, its command link, menu entry, icons and start-at-login entries (XDG
# autostart and the helper's systemd user unit). Your hermes-tray settings, decision journal
# and logs stay unless you pass --purge. Hermes' own data (~/.hermes) is never touched.
# Quit the tray first (menu → Quit). Safe to run again.
set -eu

APP=hermes-tray
MARKER=.hermes-tray-install

die() {
    printf 'uninstall.sh: %s\n' "$*" >&2
    exit 1
}

purge=no
for arg in "$@"; do
    case $arg in
        --purge) purge=yes ;;
        -h | --help)
            sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *) die "unknown option: $arg (see --help)" ;;
    esac
done

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

xdg_dir() { # $1 = value of an XDG_*_HOME variable, $2 = default under HOME
    case $1 in
        /*) printf '%s' "$1" ;;
        *) printf '%s' "$HOME/$2" ;;
    esac
}
data_home=$(xdg_dir "${XDG_DATA_HOME:-}" .local/share)
config_home=$(xdg_dir "${XDG_CONFIG_HOME:-}" .config)
state_home=$(xdg_dir "${XDG_STATE_HOME:-}" .local/state)
cache_home=$(xdg_dir "${XDG_CACHE_HOME:-}" .cache)
opt_parent=$HOME/.local/opt
opt_dir=$opt_parent/$APP
exe=$opt_dir/$APP
link=$HOME/.local/bin/$APP
icons_dir=$data_home/icons/hicolor

# 1. Start at login: these entries would run a program that is about to disappear.
rm -f -- "$config_home/autostart/$APP.desktop"
unit_dir=$config_home/systemd/user
if [ -e "$unit_dir/$APP-helper.service" ] || [ -L "$unit_dir/default.target.wants/$APP-helper.service" ]; then
    rm -f -- "$unit_dir/default.target.wants/$APP-helper.service"
    if [ ! -L "$unit_dir/$APP-helper.service" ]; then # a symlink there is the user's mask: theirs
        rm -f -- "$unit_dir/$APP-helper.service"
    fi
    if [ -n "${XDG_RUNTIME_DIR:-}" ] && [ -e "$XDG_RUNTIME_DIR/systemd/private" ] && command -v systemctl >/dev/null 2>&1; then
        systemctl --user daemon-reload >/dev/null 2>&1 || true
    fi
    rmdir -- "$unit_dir/default.target.wants" 2>/dev/null || true
fi

# 2. Menu entry, icons and the command link, as recorded at install time (plus the fixed names).
manifest=$opt_dir/installed-files
{
    if [ -f "$manifest" ]; then
        cat -- "$manifest"
    fi
    printf '%s\n' "$data_home/applications/$APP.desktop"
    for size in 16x16 22x22 24x24 32x32 48x48 64x64 128x128 256x256 scalable; do
        printf '%s\n' "$icons_dir/$size/apps/$APP.png" "$icons_dir/$size/apps/$APP.svg"
    done
} | while IFS= read -r path; do
    case $path in
        "$link") ;; # handled below
        */$APP.desktop | */apps/$APP.png | */apps/$APP.svg)
            rm -f -- "$path"
            rmdir -- "$(dirname -- "$path")" 2>/dev/null || true
            ;;
    esac
done
for size_dir in "$icons_dir"/*; do
    if [ -d "$size_dir" ]; then
        rmdir -- "$size_dir" 2>/dev/null || true
    fi
done
rmdir -- "$icons_dir" "$data_home/icons" 2>/dev/null || true
touch -- "$icons_dir" 2>/dev/null || true
if [ -L "$link" ] && [ "$(readlink -- "$link")" = "$exe" ]; then
    rm -f -- "$link"
fi

# 3. The app itself, only if install.sh made it.
if [ -d "$opt_dir" ]; then
    if [ -f "$opt_dir/$MARKER" ]; then
        rm -rf -- "$opt_dir"
    else
        printf 'uninstall.sh: %s was not made by install.sh; left alone\n' "$opt_dir" >&2
    fi
fi
rmdir -- "$opt_parent" 2>/dev/null || true

# 4. The user's own hermes-tray data, only when asked.
if [ "$purge" = yes ]; then
    rm -rf -- "${config_home:?}/$APP" "${state_home:?}/$APP" "${cache_home:?}/$APP"
    printf 'removed hermes-tray and its settings, journal and logs\n'
else
    printf 'removed hermes-tray; your settings, journal and logs stay in %s and %s (--purge removes them)\n' \
        "$config_home/$APP" "$state_home/$APP"
fi
