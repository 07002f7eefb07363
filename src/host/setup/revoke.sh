# ---------------------------------------------------------------------------------------------
# Steps of `setup revoke` (fixed text); main runs them in order, at the very end of the file
# ---------------------------------------------------------------------------------------------

# Expiry first: it blocks SSH logins and sudo at once (PAM's account check, or sshd's own
# shadow check without PAM). A locked password alone stops neither key logins nor NOPASSWD sudo.
expire_account() {
    if ! account_exists; then
        note "there is no account $U: nothing to expire, lock or end"
        return 0
    fi
    if [[ $(shadow_field 8) != 1 ]]; then
        usermod --expiredate 1 "$U"
        changed "expired account $U (no SSH login and no sudo from now on)"
    else
        ok "account $U is expired"
    fi
    if [[ $(shadow_field 2) != '!'* ]]; then
        passwd -l "$U" >/dev/null
        changed "locked the password of $U"
    else
        ok "the password of $U is locked"
    fi
}

# What "the account's processes" are. sudo keeps the account only as its real uid (effective
# uid 0), and the command sudo runs has neither uid: `pct exec` runs as root and the container's
# command as another account. What they share is the session of the login that ran sudo, so:
#   * every process with the account's uid as its real, effective, saved or filesystem uid;
#   * every process in a session such a process leads (sudo's command and all it started, also
#     once sudo or the login is gone: a session keeps its id while any member lives, and Linux
#     never reuses that id meanwhile, so the sessions found are remembered across scans);
#   * every descendant of either (a child that left the session with setsid);
#   * every process in the account's systemd slice (user-UID.slice: its login sessions' scopes,
#     where pam_systemd put them), which also holds a child that left both its session and its
#     parent (setsid after a double fork); hosts without systemd have no such slice.
# Zombies are left out: they run nothing, and their parent (or init) reaps them.
ACCOUNT_SIDS=()
ACCOUNT_PIDS=()

# Scan /proc once and set ACCOUNT_PIDS; this script and its ancestors are never in it.
scan_account_pids() {
    local uid d pid stat rest state ppid sid key r e s f line changed=1
    local -A ppid_of=() sid_of=() mine=() sids=() spare=()
    uid=$(id -u "$U")
    for sid in "${ACCOUNT_SIDS[@]}"; do sids[$sid]=1; done
    pid=$$
    while [[ $pid =~ ^[0-9]+$ ]] && ((pid > 1)); do
        spare[$pid]=1
        read -r stat 2>/dev/null <"/proc/$pid/stat" || break
        rest=${stat##*) }
        read -r _ pid _ <<<"$rest"
    done
    spare[1]=1
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        read -r stat 2>/dev/null <"$d/stat" || continue
        # The name in parentheses may hold spaces and parentheses itself: cut at the last ')'.
        rest=${stat##*) }
        read -r state ppid _ sid _ <<<"$rest"
        [[ $state == [ZX] ]] && continue
        ppid_of[$pid]=$ppid
        sid_of[$pid]=$sid
        while read -r key r e s f; do
            [[ $key == Uid: ]] || continue
            if [[ $r == "$uid" || $e == "$uid" || $s == "$uid" || $f == "$uid" ]]; then
                mine[$pid]=1
                [[ $sid != "$pid" ]] || sids[$sid]=1
            fi
            break
        done 2>/dev/null <"$d/status" || true
        while IFS= read -r line; do
            if [[ $line == *"/user-$uid.slice/"* || $line == *"/user-$uid.slice" ]]; then
                mine[$pid]=1
                break
            fi
        done 2>/dev/null <"$d/cgroup" || true
    done
    for pid in "${!sid_of[@]}"; do
        [[ -z ${sids[${sid_of[$pid]}]:-} ]] || mine[$pid]=1
    done
    while ((changed)); do
        changed=0
        for pid in "${!ppid_of[@]}"; do
            if [[ -z ${mine[$pid]:-} && -n ${mine[${ppid_of[$pid]}]:-} ]]; then
                mine[$pid]=1
                changed=1
            fi
        done
    done
    ACCOUNT_SIDS=("${!sids[@]}")
    ACCOUNT_PIDS=()
    for pid in "${!mine[@]}"; do
        [[ -n ${spare[$pid]:-} ]] || ACCOUNT_PIDS+=("$pid")
    done
}

# "PID (name)" for each pid in ACCOUNT_PIDS, for messages.
describe_account_pids() {
    local pid name out=()
    for pid in "${ACCOUNT_PIDS[@]}"; do
        name=$(cat "/proc/$pid/comm" 2>/dev/null) || name=gone
        out+=("$pid ($name)")
    done
    printf '%s\n' "${out[*]}"
}

end_processes() {
    account_exists || return 0
    scan_account_pids
    if ((${#ACCOUNT_PIDS[@]} == 0)); then
        ok "no processes of $U (by uid, session, parent or slice)"
        return 0
    fi
    local i ended
    # Stop before killing: a stopped process cannot fork, so one more scan finds every child
    # forked meanwhile; repeat until a scan finds nothing new, then kill them all at once.
    local -A stopped=()
    for ((i = 0; i < 50; i++)); do
        local new=() pid
        for pid in "${ACCOUNT_PIDS[@]}"; do [[ -n ${stopped[$pid]:-} ]] || new+=("$pid"); done
        ((${#new[@]} > 0)) || break
        kill -STOP "${new[@]}" 2>/dev/null || true
        for pid in "${new[@]}"; do stopped[$pid]=1; done
        scan_account_pids
    done
    ended=$(describe_account_pids)
    # SIGKILL ends a stopped process too. Repeat for anything that appeared after all (bounded:
    # the account is expired, so no new login or sudo can add to it).
    for ((i = 0; i < 50; i++)); do
        ((${#ACCOUNT_PIDS[@]} > 0)) || break
        kill -KILL "${ACCOUNT_PIDS[@]}" 2>/dev/null || true
        sleep 0.1
        scan_account_pids
    done
    if ((${#ACCOUNT_PIDS[@]} > 0)); then
        die "processes of $U survive SIGKILL: $(describe_account_pids)"
    fi
    changed "ended every process of $U, by uid, session, parent or slice (SIGKILL): $ended"
}

# Keys in the account's own ~/.ssh: the drop-in made sshd ignore them; without it sshd would
# read them again. Done after the processes are gone, so nothing can swap ~/.ssh meanwhile.
remove_home_keys() {
    account_exists || return 0
    local home f found=0
    home=$(getent passwd "$U" | cut -d: -f6)
    if [[ -n $home && -d $home/.ssh && ! -L $home && ! -L $home/.ssh ]]; then
        for f in "$home/.ssh/authorized_keys" "$home/.ssh/authorized_keys2"; do
            if [[ -e $f || -L $f ]]; then
                rm -f -- "$f"
                changed "removed $f"
                found=1
            fi
        done
    fi
    ((found)) || ok "no authorized_keys in the home of $U"
}

remove_sshd_config() {
    remove_file "$DROPIN"
    remove_leftover "$DROPIN.new"
    if [[ ! -f $SSHD_CONFIG ]]; then
        note "there is no sshd config $SSHD_CONFIG: nothing to reload"
        return 0
    fi
    if has_our_include; then
        rewrite_sshd_config without_include
        changed "removed the Include line pxagent had added to $SSHD_CONFIG"
    fi
    sshd_check ||
        die "sshd -t rejects $SSHD_CONFIG (see above), so sshd was not reloaded; the account is expired and its keys are gone, so it cannot log in either way"
    reload_sshd
}

remove_sudoers() {
    remove_file "$SUDOERS"
    remove_leftover "$SUDOERS.new"
    if command -v visudo >/dev/null 2>&1; then
        local out
        out=$(visudo -c 2>&1) || die "visudo -c rejects the remaining sudoers configuration: $out"
        ok "visudo -c accepts the remaining sudoers configuration"
    fi
}

verify() {
    local out
    if account_exists; then
        [[ $(shadow_field 8) == 1 ]] || die "account $U is not expired"
        ok "verified: chage -l $U: $(chage -l "$U" | grep -i '^Account expires' | tr -s ' \t' ' ')"
        scan_account_pids
        if ((${#ACCOUNT_PIDS[@]} > 0)); then
            die "account $U has processes again: $(describe_account_pids)"
        fi
        ok "verified: no processes of $U (by uid, session, parent or slice)"
    fi
    [[ ! -e $KEYS_FILE && ! -e $DROPIN && ! -e $SUDOERS ]] ||
        die "one of $KEYS_FILE, $DROPIN, $SUDOERS still exists"
    ok "verified: no key file, no sshd drop-in, no sudoers file for $U"
    if command -v sudo >/dev/null 2>&1; then
        out=$(sudo -l -U "$U" 2>&1 || true)
        if [[ $out == *"may run the following"* ]]; then
            die "sudo -l -U $U still lists rules from another sudoers file (the expiry blocks them, but remove them): $out"
        fi
        ok "verified: sudo -l -U $U lists no rules"
    fi
}

main() {
    say "pxagent setup revoke: account $U"
    need_root
    need_cmd getent id usermod passwd chage grep cut tr rm cp chown chmod mv sshd
    expire_account
    end_processes
    remove_file "$KEYS_FILE"
    remove_leftover "$KEYS_FILE.new"
    remove_home_keys
    remove_sshd_config
    remove_sudoers
    verify
    summary "pxagent setup revoke ($U)"
    say "Kept on purpose: the account $U (expired and locked, so its UID is never given to anyone else)"
    say "and $STATE_DIR (the gate's counters and approval nonces, for the audit); the host policy"
    say "and approvers are shared by every agent account of this host and stay too."
    say "Delete the account for good: userdel $U. Give access back: run the setup render script again."
}
