# ---------------------------------------------------------------------------------------------
# Steps of `setup render` (fixed text); main runs them in order, at the very end of the file
# ---------------------------------------------------------------------------------------------

# The gate is the key's forced command: it must exist, be the pxagent binary, and be root's
# alone (the agent account must not be able to replace its own gate).
check_gate() {
    local real mode version
    [[ -e $GATE ]] || die "the gate $GATE is missing: copy the pxagent binary there first (install -o root -g root -m 0755 ./pxagent $GATE), then run this script again"
    real=$(readlink -f -- "$GATE")
    [[ -f $real && -x $real ]] || die "the gate $GATE is not an executable file"
    need_trusted "$real" "the gate"
    mode=$(stat -c '%a' -- "$real")
    (((8#$mode & 8#022) == 0)) || die "the gate $GATE is writable by its group or others: chmod 0755 $GATE"
    version=$("$GATE" --version 2>&1) || die "$GATE --version failed ($version): copy the pxagent binary built for this host there"
    [[ $version == pxagent\ * ]] || die "$GATE --version printed '$version': that is not pxagent"
    ok "gate $GATE ($version)"
}

# The helper (iso upload) runs as root from sudoers lines: like the gate it must be root's
# alone, in directories only root can change. Needed only when the profile has iso upload.
check_helper() {
    local real mode said
    [[ $HELPER_NEEDED == yes ]] || return 0
    [[ -e $HELPER ]] || die "the helper $HELPER is missing (the profile $PROFILE has iso upload): copy pxagent-helper, built with pxagent, there first (install -D -o root -g root -m 0755 ./pxagent-helper $HELPER), then run this script again"
    real=$(readlink -f -- "$HELPER")
    [[ $real == "$HELPER" ]] || die "the helper $HELPER is a symlink (to $real): install the file itself there"
    [[ -f $real && -x $real ]] || die "the helper $HELPER is not an executable file"
    need_trusted "$real" "the helper"
    mode=$(stat -c '%a' -- "$real")
    (((8#$mode & 8#022) == 0)) || die "the helper $HELPER is writable by its group or others: chmod 0755 $HELPER"
    said=$("$HELPER" </dev/null 2>&1) && die "$HELPER without arguments did not refuse: that is not pxagent-helper"
    [[ $said == pxagent-helper:* ]] || die "$HELPER printed '$said': that is not pxagent-helper"
    ok "helper $HELPER"
}

# An existing account is taken over only when that cannot hurt anyone: never root, never a
# system account pxagent did not create, never one with a usable password (a person's).
check_account() {
    if ! account_exists; then
        if getent group "$U" >/dev/null 2>&1; then
            die "there is no account $U but a group $U exists: the new account would get that group; choose another --user"
        fi
        ok "account $U does not exist yet: it will be created"
        return 0
    fi
    local uid gid comment password
    uid=$(id -u "$U")
    gid=$(id -g "$U")
    comment=$(getent passwd "$U" | cut -d: -f5)
    password=$(shadow_field 2)
    ((uid != 0)) || die "account $U has uid 0: pxagent never manages a root account"
    if [[ $comment != "$ACCOUNT_COMMENT" ]]; then
        ((uid >= 1000)) || die "account $U (uid $uid) is a system account that pxagent did not create: choose another --user"
        [[ $password != \$* ]] || die "account $U has a usable password, so it looks like a person's account (setup would take its password, groups and shell away): choose another --user, or remove its password first (usermod -p '*' $U)"
    fi
    ((gid >= 1000)) || die "the primary group of $U, $(id -gn "$U") (gid $gid), is a system group: choose another --user"
    ok "account $U exists (uid $uid) and may be managed by pxagent"
}

precheck() {
    need_root
    need_cmd getent id useradd usermod install stat cmp chown chmod mv cp rm readlink dirname \
        grep cut tr mktemp sshd runuser
    check_gate
    check_helper
    [[ -f $SSHD_CONFIG ]] || die "the sshd config $SSHD_CONFIG does not exist (--sshd-config names the file your sshd reads)"
    need_trusted "$SSHD_CONFIG" "the sshd config"
    sshd_check || die "sshd -t rejects $SSHD_CONFIG before any change (see above): fix that first"
    ok "sshd -t accepts $SSHD_CONFIG"
    check_account
    if [[ $APPROVERS_GIVEN == no && -f $APPROVERS ]] && grep -qF -- "$KEY_BLOB" "$APPROVERS"; then
        die "the agent's own key is listed in $APPROVERS: it could approve its own requests; remove that line first"
    fi
}

# Classic sudo >= 1.9.10: regex arguments in rules, I/O logs. Stock PVE 9 ships no sudo at all;
# sudo-rs has neither feature.
ensure_sudo() {
    local version
    if ! command -v sudo >/dev/null 2>&1; then
        need_cmd apt-get
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y sudo >/dev/null; then
            DEBIAN_FRONTEND=noninteractive apt-get update >/dev/null
            DEBIAN_FRONTEND=noninteractive apt-get install -y sudo >/dev/null ||
                die "apt-get install sudo failed: install classic sudo (>= 1.9.10) yourself and run this script again"
        fi
        changed "installed the sudo package (classic sudo)"
    fi
    # stdout only, and its "Sudo version" line: with a host name missing from /etc/hosts, sudo
    # first prints "unable to resolve host" on stderr.
    version=$(sudo -V 2>/dev/null | grep -m1 '^Sudo version' || true)
    [[ -n $version ]] || version=$(sudo -V 2>&1 | head -n1 || true)
    if [[ ! $version =~ ^Sudo\ version\ ([0-9]+)\.([0-9]+)\.([0-9]+) ]]; then
        die "sudo here is not classic sudo ('$version'; sudo-rs?): pxagent's rules need classic sudo >= 1.9.10 (apt-get install sudo)"
    fi
    local major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]} patch=${BASH_REMATCH[3]}
    if ((major < 1 || (major == 1 && (minor < 9 || (minor == 9 && patch < 10))))); then
        die "$version is too old: pxagent's rules use regex arguments, which need sudo >= 1.9.10"
    fi
    need_cmd visudo
    ok "$version"
}

# No password ('*': no password can match it, and unlike '!' sshd does not treat it as locked
# when UsePAM is off), no supplementary groups, a POSIX shell (sshd runs the forced command with
# `$SHELL -c`), no expiry date (a revoke sets one; rendering again undoes it).
ensure_account() {
    if ! account_exists; then
        useradd --create-home --shell /bin/sh --user-group --comment "$ACCOUNT_COMMENT" "$U"
        changed "created account $U (uid $(id -u "$U"))"
    fi
    if [[ $(getent passwd "$U" | cut -d: -f7) != /bin/sh ]]; then
        usermod --shell /bin/sh "$U"
        changed "set the shell of $U to /bin/sh"
    fi
    if [[ $(shadow_field 2) != '*' ]]; then
        usermod --password '*' "$U"
        changed "removed the password of $U ('*': key login only)"
    fi
    if [[ -n $(shadow_field 8) ]]; then
        usermod --expiredate '' "$U"
        changed "account $U no longer expires (a revoke had expired it)"
    fi
    local primary extra
    primary=$(id -gn "$U")
    extra=$(id -Gn "$U" | tr ' ' '\n' | grep -vxF -- "$primary" | tr '\n' ' ' || true)
    if [[ -n ${extra// /} ]]; then
        usermod -G '' "$U"
        changed "removed $U from its supplementary groups: ${extra% }"
    fi
    ok "account $U: no password, no expiry, no supplementary groups, shell /bin/sh"
}

# The gate runs as the account and keeps its rate-limit counters and issued statements in
# STATE_DIR. The approvals used on this host are recorded in NONCE_DIR, shared by every gated
# account so that an approval is used once per host: root's, sticky (an account's gate can
# add a record but never remove another account's), like /tmp. The approvers' signed freezes
# and thaws (the kill switch without root) are kept in CONTROL_DIR the same way.
ensure_state_dir() {
    ensure_dir "$STATE_BASE" root:root 0755
    ensure_dir "$STATE_DIR" "$U:$(id -gn "$U")" 0700
    ensure_dir "$NONCE_DIR" root:root 1777
    ensure_dir "$CONTROL_DIR" root:root 1777
}

install_key() {
    ensure_dir "${KEYS_DIR%/*}" root:root 0755
    ensure_dir "$KEYS_DIR" root:root 0755
    put_file "$KEYS_FILE" 0644 data_authorized_keys
}

# install_host_file PATH PRODUCER GIVEN WHAT: the host policy or the approvers. A file given
# on the command line replaces the installed one (kept as .bak); without one an existing file
# stays as it is and only a missing one is created.
install_host_file() {
    local path=$1 producer=$2 given=$3 what=$4 dir
    dir=$(dirname -- "$path")
    if [[ ! -d $dir ]]; then
        install -d -o root -g root -m 0755 -- "$dir"
        changed "created $dir (root:root, 0755)"
    fi
    need_trusted "$dir" "the directory of the $what"
    if [[ $given == yes ]]; then
        put_file "$path" 0644 "$producer" "" backup
    elif [[ -e $path || -L $path ]]; then
        need_trusted "$path" "the $what"
        ok "$path (kept as it is: this script brings no $what)"
    else
        put_file "$path" 0644 "$producer"
    fi
}

visudo_file_ok() {
    local out
    out=$(visudo -cf "$1" 2>&1) || {
        printf '%s\n' "$out" >&2
        return 1
    }
}

install_sudoers() {
    local dir prev="" out
    dir=$(dirname -- "$SUDOERS")
    [[ -d $dir ]] || die "$dir does not exist: the sudo package creates it (and /etc/sudoers reads it with @includedir)"
    need_trusted "$dir" "the sudoers directory"
    if [[ -f $SUDOERS ]]; then
        prev=$(mktemp)
        cp -p -- "$SUDOERS" "$prev"
    fi
    put_file "$SUDOERS" 0440 data_sudoers visudo_file_ok
    if ! out=$(visudo -c 2>&1); then
        if [[ -n $prev ]]; then mv -f -- "$prev" "$SUDOERS"; else rm -f -- "$SUDOERS"; fi
        die "visudo -c rejects the whole sudoers configuration with the new $SUDOERS, so the previous state is back: $out"
    fi
    [[ -z $prev ]] || rm -f -- "$prev"
    ok "visudo -c accepts the whole sudoers configuration"
}

configure_sshd() {
    local dir old="" added=0
    dir=$(dirname -- "$DROPIN")
    if [[ ! -d $dir ]]; then
        install -d -o root -g root -m 0755 -- "$dir"
        changed "created $dir (root:root, 0755)"
    fi
    need_trusted "$dir" "the sshd drop-in directory"
    if [[ -f $DROPIN ]]; then
        old=$(mktemp)
        cp -p -- "$DROPIN" "$old"
    fi
    put_file "$DROPIN" 0644 data_sshd_dropin
    if dropin_is_included; then
        ok "$SSHD_CONFIG includes $DROPIN"
    else
        cp -p -- "$SSHD_CONFIG" "$SSHD_CONFIG.bak"
        rewrite_sshd_config with_include
        added=1
        changed "added '$INCLUDE_LINE' at the top of $SSHD_CONFIG, which included no drop-in directory (previous file kept as $SSHD_CONFIG.bak)"
    fi
    if ! sshd_check; then
        if [[ -n $old ]]; then mv -f -- "$old" "$DROPIN"; else rm -f -- "$DROPIN"; fi
        if ((added)); then rewrite_sshd_config without_include; fi
        die "sshd -t rejects the configuration with pxagent's drop-in (see above): the previous files are back and sshd was not reloaded"
    fi
    [[ -z $old ]] || rm -f -- "$old"
    ok "sshd -t accepts $SSHD_CONFIG with $DROPIN"
    reload_sshd
}

verify() {
    local out want
    out=$(sudo -l -U "$U" 2>&1) || die "sudo -l -U $U failed: $out"
    [[ $out == *"(root) NOPASSWD:"* ]] ||
        die "sudo -l -U $U lists no pxagent rules (does /etc/sudoers read $(dirname -- "$SUDOERS") with @includedir?): $out"
    ok "verified: sudo -l -U $U lists its rules"
    out=$(sshd_settings_for "$U") || die "sshd -T -C user=$U failed"
    for want in "forcecommand $GATE_COMMAND" "authorizedkeysfile $KEYS_DIR/%u" \
        "authenticationmethods publickey" "pubkeyauthentication yes" "passwordauthentication no" \
        "kbdinteractiveauthentication no" "disableforwarding yes" "permittunnel no" \
        "permittty no" "permituserrc no"; do
        grep -qxF -- "$want" <<<"$out" ||
            die "sshd -T for $U does not show '$want': an earlier Match block sets it first (sshd keeps the first value it reads); look for Match blocks in $SSHD_CONFIG and the files it includes"
    done
    ok "verified: sshd -T for $U: key only, forced into the gate, no forwarding, no tty"
    if ! grep -qxF -- "authorizedkeyscommand none" <<<"$out"; then
        note "sshd also asks an AuthorizedKeysCommand for $U's keys: keys it returns skip the from= restriction (the forced command still applies)"
    fi
    out=$(sshd_settings_for pxagent-nobody) || die "sshd -T -C user=pxagent-nobody failed"
    if grep -qxF -- "forcecommand $GATE_COMMAND" <<<"$out"; then
        die "sshd applies the drop-in of $U to other users too: its Match block leaks into the configuration after it"
    fi
    ok "verified: sshd -T for other users: the drop-in does not apply"
    [[ $(shadow_field 2) == '*' && -z $(shadow_field 8) ]] || die "account $U still has a password or an expiry date"
    ok "verified: account $U has no password and no expiry date"
    runuser -u "$U" -- "$GATE" --version >/dev/null 2>&1 || die "$U cannot run the gate $GATE"
    runuser -u "$U" -- test -r "$POLICY" || die "$U cannot read the host policy $POLICY"
    runuser -u "$U" -- test -r "$APPROVERS" || die "$U cannot read the approvers $APPROVERS"
    runuser -u "$U" -- test -w "$STATE_DIR" || die "$U cannot write its state directory $STATE_DIR"
    ok "verified: $U can run the gate, read the policy and the approvers, and write $STATE_DIR"
}

main() {
    say "pxagent setup render: account $U, profile $PROFILE"
    precheck
    ensure_sudo
    ensure_account
    ensure_state_dir
    install_key
    install_host_file "$POLICY" data_policy "$POLICY_GIVEN" "host policy"
    install_host_file "$APPROVERS" data_approvers "$APPROVERS_GIVEN" "approvers file"
    install_sudoers
    configure_sshd
    verify
    summary "pxagent setup render ($U)"
    say "The agent logs in as $U with the key $KEY_FINGERPRINT${FROM:+ from $FROM}, and only into the gate."
    say "Check from the client: pxagent -H <this host> -u $U preflight"
    say "Revoke: pxagent setup revoke --user $U (prints the script that does it)"
}
