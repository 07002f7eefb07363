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

end_processes() {
    account_exists || return 0
    if ! pgrep -u "$U" >/dev/null; then
        ok "no processes of $U"
        return 0
    fi
    pkill -KILL -u "$U" || true
    local i
    for ((i = 0; i < 50; i++)); do
        pgrep -u "$U" >/dev/null || break
        sleep 0.1
    done
    if pgrep -u "$U" >/dev/null; then
        die "processes of $U survive SIGKILL: $(pgrep -l -u "$U" | tr '\n' ' ')"
    fi
    changed "ended every process of $U (SIGKILL)"
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
        if pgrep -u "$U" >/dev/null; then die "account $U has processes again"; fi
        ok "verified: no processes of $U"
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
    need_cmd getent usermod passwd chage pgrep pkill grep cut tr rm cp chown chmod mv sshd
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
