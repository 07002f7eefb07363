# ---------------------------------------------------------------------------------------------
# Helpers (fixed text, the same in every script pxagent renders; the values are above)
# ---------------------------------------------------------------------------------------------

CHANGED=()
NOTES=()

say() { printf '%s\n' "$*"; }
ok() { printf 'ok       %s\n' "$*"; }
changed() {
    printf 'changed  %s\n' "$*"
    CHANGED+=("$*")
}
note() {
    printf 'note     %s\n' "$*"
    NOTES+=("$*")
}
die() {
    printf 'FAILED   %s\n' "$*" >&2
    if ((${#CHANGED[@]} > 0)); then
        printf '         changed before the failure: %s\n' "${CHANGED[@]}" >&2
    fi
    exit 1
}

need_root() {
    [[ $(id -u) == 0 ]] || die "run this script as root (it writes /etc and manages accounts)"
}

# need_cmd CMD...: every command exists (PATH is the system's sbin and bin directories).
need_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || die "the command '$c' is missing on this host"
    done
}

# The first of PATH and the directories above it that is not owned by root, is writable by
# others, or is writable by a group other than root's; nothing when all of them are safe. Whoever
# can write there could swap what root installs (or the gate the agent is forced into).
untrusted_part() {
    local p uid gid mode
    p=$(readlink -f -- "$1") || {
        printf '%s\n' "$1"
        return 0
    }
    while :; do
        if ! read -r uid gid mode < <(stat -c '%u %g %a' -- "$p" 2>/dev/null); then
            printf '%s\n' "$p"
            return 0
        fi
        if ((uid != 0 || (8#$mode & 8#002) != 0 || ((8#$mode & 8#020) != 0 && gid != 0))); then
            printf '%s\n' "$p"
            return 0
        fi
        [[ $p == / ]] && return 0
        p=$(dirname -- "$p")
    done
}

# need_trusted PATH WHAT: die unless PATH and every directory above it are root's alone.
need_trusted() {
    local bad
    bad=$(untrusted_part "$1")
    [[ -z $bad ]] || die "$2 $1 is not safe: $bad is not owned by root or is writable by others than root (fix its owner/mode, or choose another path)"
}

# Owner, group and mode of a path as `stat` prints them, e.g. "root:root 644".
perms() { stat -c '%U:%G %a' -- "$1"; }

# ensure_dir DIR OWNER:GROUP MODE: DIR exists as a real directory with exactly that owner and mode.
ensure_dir() {
    local dir=$1 owner=$2 mode=$3
    [[ ! -L $dir ]] || die "$dir is a symbolic link: remove it and run this script again"
    if [[ ! -d $dir ]]; then
        [[ ! -e $dir ]] || die "$dir exists and is not a directory: remove it and run this script again"
        install -d -o "${owner%%:*}" -g "${owner#*:}" -m "$mode" -- "$dir"
        changed "created $dir ($owner, $mode)"
    elif [[ $(perms "$dir") != "$owner ${mode#0}" ]]; then
        local was
        was=$(perms "$dir")
        chown -- "$owner" "$dir"
        chmod -- "$mode" "$dir"
        changed "set $dir to $owner, $mode (was $was)"
    else
        ok "$dir ($owner, $mode)"
    fi
}

# put_file PATH MODE PRODUCER [CHECK] [BACKUP]: make PATH hold exactly what the function PRODUCER
# prints, owned by root:root with MODE. The text goes to PATH.new first (every directory the
# script writes to ignores names with a dot: sudoers.d, sshd_config.d/*.conf, the key files);
# the function CHECK, when given, must accept PATH.new; then one `mv` replaces PATH. With
# BACKUP=backup a PATH whose text differs is kept as PATH.bak.
put_file() {
    local path=$1 mode=$2 producer=$3 check=${4:-} backup=${5:-} new="$1.new"
    [[ ! -L $path ]] || die "$path is a symbolic link: remove it and run this script again"
    [[ ! -e $path || -f $path ]] || die "$path exists and is not a regular file: remove it and run this script again"
    rm -f -- "$new"
    "$producer" >"$new"
    chown root:root -- "$new"
    chmod -- "$mode" "$new"
    if [[ -n $check ]] && ! "$check" "$new"; then
        rm -f -- "$new"
        die "the new $path did not pass its check (nothing was replaced)"
    fi
    if [[ -f $path ]] && cmp -s -- "$new" "$path"; then
        if [[ $(perms "$path") == "root:root ${mode#0}" ]]; then
            rm -f -- "$new"
            ok "$path"
            return 0
        fi
        mv -f -- "$new" "$path"
        changed "set $path to root:root, $mode"
        return 0
    fi
    if [[ $backup == backup && -f $path ]]; then
        cp -p -- "$path" "$path.bak"
        note "kept the previous $path as $path.bak"
    fi
    local verb=wrote
    [[ -f $path ]] && verb=replaced
    mv -f -- "$new" "$path"
    changed "$verb $path"
}

# remove_file PATH: PATH is gone (a symbolic link is removed as such, never followed).
remove_file() {
    if [[ -e $1 || -L $1 ]]; then
        rm -f -- "$1"
        changed "removed $1"
    else
        ok "$1 is absent"
    fi
}

# remove_leftover PATH: like remove_file, silent when there is nothing (a .new of a failed run).
remove_leftover() {
    if [[ -e $1 || -L $1 ]]; then
        rm -f -- "$1"
        changed "removed the leftover $1"
    fi
}

# Field N of the account's shadow entry (2 = password, 8 = expiry day), empty when absent.
shadow_field() { getent shadow "$U" | cut -d: -f"$1"; }

account_exists() { getent passwd "$U" >/dev/null 2>&1; }

# --- sshd ---

readonly INCLUDE_NOTE="# pxagent: the sshd drop-in of account $U (pxagent setup render added these two lines; setup revoke removes them)"
readonly INCLUDE_LINE="Include $DROPIN"

# Whether an Include line of the main sshd config names the drop-in (sshd globs Include's
# arguments and reads relative ones from /etc/ssh).
dropin_is_included() {
    local key rest pattern file
    while read -r key rest; do
        [[ ${key,,} == include ]] || continue
        # shellcheck disable=SC2086 # word splitting and globbing are the point: sshd globs too
        for pattern in $rest; do
            [[ $pattern == /* ]] || pattern="/etc/ssh/$pattern"
            for file in $pattern; do
                [[ $file != "$DROPIN" ]] || return 0
            done
        done
    done <"$SSHD_CONFIG"
    return 1
}

# Rewrite the main sshd config through a temporary file that keeps its owner and mode.
rewrite_sshd_config() {
    local tmp="$SSHD_CONFIG.pxagent-tmp"
    rm -f -- "$tmp"
    "$@" >"$tmp"
    chown --reference="$SSHD_CONFIG" -- "$tmp"
    chmod --reference="$SSHD_CONFIG" -- "$tmp"
    mv -f -- "$tmp" "$SSHD_CONFIG"
}

with_include() {
    printf '%s\n%s\n' "$INCLUDE_NOTE" "$INCLUDE_LINE"
    cat -- "$SSHD_CONFIG"
}

without_include() { grep -vxF -e "$INCLUDE_NOTE" -e "$INCLUDE_LINE" -- "$SSHD_CONFIG" || true; }

has_our_include() { grep -qxF -e "$INCLUDE_LINE" -- "$SSHD_CONFIG"; }

# The effective sshd settings for a connection of USER (lower-case keywords, as sshd -T prints).
sshd_settings_for() { sshd -T -f "$SSHD_CONFIG" -C "user=$1,host=localhost,addr=127.0.0.1"; }

sshd_check() {
    local out
    out=$(sshd -t -f "$SSHD_CONFIG" 2>&1) || {
        printf '%s\n' "$out" >&2
        return 1
    }
}

# Make the running sshd read its configuration again (SIGHUP; existing sessions stay). Always
# done, even when no file changed, so that a run that failed after writing can be repeated.
reload_sshd() {
    local pid
    if [[ -n $SSHD_PID_FILE ]]; then
        [[ -f $SSHD_PID_FILE ]] || die "the sshd pid file $SSHD_PID_FILE does not exist: is that sshd running?"
        pid=$(tr -dc '0-9' <"$SSHD_PID_FILE")
        [[ -n $pid ]] || die "the sshd pid file $SSHD_PID_FILE holds no pid"
        kill -HUP "$pid" || die "could not signal sshd (pid $pid from $SSHD_PID_FILE)"
        say "done     reloaded sshd (SIGHUP to pid $pid)"
    elif [[ -d /run/systemd/system ]]; then
        local unit
        for unit in ssh.service sshd.service; do
            if systemctl is-active --quiet "$unit"; then
                systemctl reload "$unit" || die "systemctl reload $unit failed"
                say "done     reloaded sshd (systemctl reload $unit)"
                return 0
            fi
        done
        note "neither ssh.service nor sshd.service is running: nothing to reload (sshd reads the new configuration when it starts)"
    elif [[ -f /run/sshd.pid ]]; then
        pid=$(tr -dc '0-9' </run/sshd.pid)
        [[ -n $pid ]] || die "/run/sshd.pid holds no pid"
        kill -HUP "$pid" || die "could not signal sshd (pid $pid from /run/sshd.pid)"
        say "done     reloaded sshd (SIGHUP to pid $pid)"
    else
        note "no systemd and no /run/sshd.pid: reload sshd yourself (kill -HUP its pid)"
    fi
}

# --- summary ---

summary() {
    local what=$1 item
    say ""
    if ((${#CHANGED[@]} == 0)); then
        say "$what: nothing changed (everything was already in place)"
    else
        say "$what: ${#CHANGED[@]} change(s):"
        for item in "${CHANGED[@]}"; do
            say "  - $item"
        done
    fi
    for item in "${NOTES[@]}"; do
        say "  note: $item"
    done
}
