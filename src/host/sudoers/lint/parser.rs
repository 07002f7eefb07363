//! Sudoers entries and command items: Defaults, aliases and user specs parsed into
//! typed values, and the alias table the checks resolve names through.

use super::*;

#[derive(Debug, Clone)]
pub(super) enum Entry {
    Include,
    Defaults(DefaultsEntry),
    /// `Cmnd_Alias A = …[ : B = …]`.
    CmndAlias(Vec<(String, Vec<Item>)>),
    /// `User_Alias`, `Runas_Alias`, `Host_Alias`: names only.
    NameAlias {
        kind: NameKind,
        defs: Vec<(String, Vec<String>)>,
    },
    Spec(Spec),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NameKind {
    User,
    Runas,
    Host,
}

/// `users hosts = cmnds [: hosts = cmnds]`; host lists are not judged.
#[derive(Debug, Clone)]
pub(super) struct Spec {
    pub(super) users: Vec<String>,
    pub(super) privileges: Vec<Vec<Item>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Binding {
    Global,
    Host,
    User,
    Runas,
    Cmnd,
}

#[derive(Debug, Clone)]
pub(super) struct DefaultsEntry {
    pub(super) binding: Binding,
    pub(super) targets: Vec<String>,
    pub(super) options: Vec<DefOpt>,
}

#[derive(Debug, Clone)]
pub(super) struct DefOpt {
    /// As written (`!log_output` → name `log_output`, negated).
    pub(super) text: String,
    pub(super) name: String,
    pub(super) negated: bool,
    /// `=`, `+=` or `-=` given.
    pub(super) has_value: bool,
    /// `-=`: the value is taken out of a list.
    pub(super) removes: bool,
    pub(super) value: String,
}

pub(super) fn parse_entry(text: &str) -> Result<Entry, String> {
    if let Some(rest) = text.strip_prefix("Defaults") {
        match rest.bytes().next() {
            None | Some(b' ' | b'\t' | b':' | b'@' | b'>' | b'!') => return parse_defaults(rest),
            _ => {}
        }
    }
    for (kw, kind) in [
        ("Cmnd_Alias", None),
        ("Cmd_Alias", None),
        ("User_Alias", Some(NameKind::User)),
        ("Runas_Alias", Some(NameKind::Runas)),
        ("Host_Alias", Some(NameKind::Host)),
    ] {
        if let Some(rest) = text.strip_prefix(kw)
            && rest.starts_with([' ', '\t'])
        {
            return parse_alias(rest, kind);
        }
    }
    parse_spec(text)
}

pub(super) fn parse_defaults(rest: &str) -> Result<Entry, String> {
    let mut c = Cursor::new(rest);
    let binding = match c.peek() {
        Some(b':') => Binding::User,
        Some(b'@') => Binding::Host,
        Some(b'>') => Binding::Runas,
        Some(b'!') => Binding::Cmnd,
        _ => Binding::Global,
    };
    let mut targets = Vec::new();
    if binding != Binding::Global {
        c.bump();
        loop {
            c.skip_blanks();
            let start = c.pos;
            if binding == Binding::Cmnd && c.rest().trim_start_matches('!').starts_with('^') {
                while c.peek() == Some(b'!') {
                    c.bump();
                }
                read_regex(&mut c);
            } else {
                c.take_until(|b| matches!(b, b' ' | b'\t' | b','));
            }
            if c.pos == start {
                return Err("`Defaults` binding without a name".into());
            }
            targets.push(c.s[start..c.pos].to_string());
            c.skip_blanks();
            if c.peek() == Some(b',') {
                c.bump();
            } else {
                break;
            }
        }
    }
    let options: Vec<DefOpt> = split_unquoted(c.rest(), b',')
        .into_iter()
        .map(|o| parse_def_opt(o.trim()))
        .filter(|o| !o.text.is_empty())
        .collect();
    if options.is_empty() {
        return Err("`Defaults` without options".into());
    }
    Ok(Entry::Defaults(DefaultsEntry {
        binding,
        targets,
        options,
    }))
}

pub(super) fn parse_def_opt(text: &str) -> DefOpt {
    let bangs = text.len() - text.trim_start_matches(['!', ' ', '\t']).len();
    let negated = text[..bangs].matches('!').count() % 2 == 1;
    let body = &text[bangs..];
    let name_len = body
        .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
        .unwrap_or(body.len());
    let name = body[..name_len].to_string();
    let after = body[name_len..].trim_start();
    let value = after
        .strip_prefix("+=")
        .or_else(|| after.strip_prefix("-="))
        .or_else(|| after.strip_prefix('='));
    DefOpt {
        text: text.to_string(),
        name,
        negated,
        has_value: value.is_some(),
        removes: after.starts_with("-="),
        value: value
            .map(|v| v.trim().trim_matches('"').to_string())
            .unwrap_or_default(),
    }
}

pub(super) fn parse_alias(rest: &str, kind: Option<NameKind>) -> Result<Entry, String> {
    let mut c = Cursor::new(rest);
    let mut cmnd_defs = Vec::new();
    let mut name_defs = Vec::new();
    loop {
        c.skip_blanks();
        let start = c.pos;
        c.take_until(|b| !(b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
        let name = c.s[start..c.pos].to_string();
        if !is_alias_name(&name) {
            return Err(format!(
                "expected an upper-case alias name, found `{}`",
                c.s[start..].trim()
            ));
        }
        c.skip_blanks();
        if c.peek() != Some(b'=') {
            return Err(format!("expected `=` after alias name {name}"));
        }
        c.bump();
        match kind {
            None => cmnd_defs.push((name, parse_items(&mut c)?)),
            Some(_) => {
                let start = c.pos;
                c.take_until(|b| b == b':');
                let members = c.s[start..c.pos]
                    .split(',')
                    .map(|m| m.trim().to_string())
                    .filter(|m| !m.is_empty())
                    .collect();
                name_defs.push((name, members));
            }
        }
        if c.peek() == Some(b':') {
            c.bump();
        } else {
            break;
        }
    }
    Ok(match kind {
        None => Entry::CmndAlias(cmnd_defs),
        Some(kind) => Entry::NameAlias {
            kind,
            defs: name_defs,
        },
    })
}

pub(super) fn parse_spec(text: &str) -> Result<Entry, String> {
    let eq = find_unescaped(text, 0, b'=')
        .ok_or("not a Defaults line, an alias, or a `user host = command` rule")?;
    let left = &text[..eq];
    // Words split at blanks; `alice, bob` stays one list.
    let mut groups: Vec<String> = Vec::new();
    for word in split_unescaped_blanks(left) {
        match groups.last_mut() {
            Some(last) if last.ends_with(',') || word.starts_with(',') => last.push_str(word),
            _ => groups.push(word.to_string()),
        }
    }
    if groups.len() != 2 {
        return Err(format!(
            "expected `users hosts =`, found `{}=`",
            left.trim()
        ));
    }
    let users = groups[0]
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(String::from)
        .collect();
    let mut c = Cursor::new(&text[eq + 1..]);
    let mut privileges = Vec::new();
    loop {
        privileges.push(parse_items(&mut c)?);
        if c.peek() != Some(b':') {
            break;
        }
        // `: other-hosts = more commands`
        c.bump();
        let eq = find_unescaped(c.s, c.pos, b'=').ok_or("`:` not followed by `hosts =`")?;
        c.pos = eq + 1;
    }
    Ok(Entry::Spec(Spec { users, privileges }))
}

// ---------------------------------------------------------------------------------------
// Command items (the part after `=`, or one `sudo -l` command)
// ---------------------------------------------------------------------------------------

/// Tags a rule may carry (`NOPASSWD:` …). Also what a Defaults option must not be spelled as.
pub(super) const TAGS: [&str; 16] = [
    "NOPASSWD",
    "PASSWD",
    "NOEXEC",
    "EXEC",
    "INTERCEPT",
    "NOINTERCEPT",
    "SETENV",
    "NOSETENV",
    "LOG_INPUT",
    "NOLOG_INPUT",
    "LOG_OUTPUT",
    "NOLOG_OUTPUT",
    "MAIL",
    "NOMAIL",
    "FOLLOW",
    "NOFOLLOW",
];

/// Per-command options (`CWD=/`, `TIMEOUT=5m` …): skipped, they do not widen a rule.
pub(super) const COMMAND_OPTIONS: [&str; 10] = [
    "CWD",
    "CHROOT",
    "ROLE",
    "TYPE",
    "TIMEOUT",
    "NOTBEFORE",
    "NOTAFTER",
    "APPARMOR_PROFILE",
    "PRIVS",
    "LIMITPRIVS",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Runas {
    pub(super) users: Vec<String>,
    pub(super) groups: Vec<String>,
}

/// One entry of a command list: `(runas) OPTIONS TAGS: !command args`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Item {
    pub(super) runas: Option<Runas>,
    pub(super) tags: Vec<&'static str>,
    /// Per-command options written before it (`CHROOT=/srv`, `CWD=*`), name and value.
    pub(super) options: Vec<(&'static str, String)>,
    pub(super) negated: bool,
    pub(super) cmnd: Cmnd,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cmnd {
    All,
    Alias(String),
    Sudoedit(Args),
    Path { path: String, args: Args },
}

/// What follows the command path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Args {
    /// Nothing: sudo allows any arguments.
    Any,
    /// `""`: sudo allows no arguments.
    Empty,
    /// An fnmatch pattern over the space-joined arguments (escapes for `,:=` removed).
    Glob(String),
    /// `^…$`, as written (sudo passes escapes through to regcomp).
    Regex(String),
    /// `^…` without its closing `$`: sudo rejects the line.
    Unterminated(String),
    /// `^…$` followed by more text before the next command (`^a$|^b$`, `^(x$|y)$`): sudo's
    /// regex ends at the first `$`, so the rest is a syntax error (visudo rejects the file).
    EarlyDollar(String, String),
}

impl Args {
    pub(super) fn text(&self) -> &str {
        match self {
            Args::Any => "",
            Args::Empty => "\"\"",
            Args::Glob(s) | Args::Regex(s) | Args::Unterminated(s) | Args::EarlyDollar(s, _) => s,
        }
    }
}

impl Cmnd {
    pub(super) fn display(&self) -> String {
        let with = |head: &str, args: &Args| match args {
            Args::Any => head.to_string(),
            a => format!("{head} {}", a.text()),
        };
        match self {
            Cmnd::All => "ALL".into(),
            Cmnd::Alias(n) => n.clone(),
            Cmnd::Sudoedit(a) => with("sudoedit", a),
            Cmnd::Path { path, args } => with(path, args),
        }
    }
}

/// Parse `item, item, …` up to a top-level `:` (next host spec or alias) or the end.
pub(super) fn parse_items(c: &mut Cursor) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    loop {
        c.skip_blanks();
        items.push(parse_item(c, false)?);
        c.skip_blanks();
        match c.peek() {
            Some(b',') => c.bump(),
            None | Some(b':') => return Ok(items),
            Some(_) => return Err(format!("unexpected `{}` after a command", c.rest())),
        }
    }
}

/// Parse one command list entry. With `whole`, glob arguments run to the end of the text
/// (a `sudo -l` command, already split and unescaped by sudo); otherwise they end at an
/// unescaped `,` `:` `=` as in sudoers.
pub(super) fn parse_item(c: &mut Cursor, whole: bool) -> Result<Item, String> {
    c.skip_blanks();
    let mut runas = None;
    if c.peek() == Some(b'(') {
        let close = c.s[c.pos..].find(')').ok_or("unclosed `(` in runas list")? + c.pos;
        let inner = &c.s[c.pos + 1..close];
        let (u, g) = inner.split_once(':').unwrap_or((inner, ""));
        let list = |s: &str| {
            s.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect()
        };
        runas = Some(Runas {
            users: list(u),
            groups: list(g),
        });
        c.pos = close + 1;
    }
    let mut tags = Vec::new();
    let mut options = Vec::new();
    'prefix: loop {
        c.skip_blanks();
        for opt in COMMAND_OPTIONS {
            if c.rest().starts_with(opt) && c.rest()[opt.len()..].trim_start().starts_with('=') {
                c.pos += opt.len();
                c.skip_blanks();
                c.bump(); // '='
                c.skip_blanks();
                let start = c.pos;
                if c.peek() == Some(b'"') {
                    c.bump();
                    c.take_until(|b| b == b'"');
                    c.bump();
                } else {
                    c.take_until(|b| matches!(b, b' ' | b'\t' | b','));
                }
                options.push((opt, c.s[start..c.pos].trim_matches('"').to_string()));
                continue 'prefix;
            }
        }
        for tag in TAGS {
            if let Some(after) = c.rest().strip_prefix(tag)
                && after.trim_start_matches([' ', '\t']).starts_with(':')
            {
                c.pos += tag.len();
                c.skip_blanks();
                c.bump(); // ':'
                tags.push(tag);
                continue 'prefix;
            }
        }
        break;
    }
    // Digests (`sha256:… /usr/bin/x`) pin the binary's content; they do not widen a rule.
    static DIGEST: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(sha224|sha256|sha384|sha512)\s*:\s*[A-Za-z0-9+/=]+\s*(,\s*)?")
            .expect("static regex")
    });
    while let Some(m) = DIGEST.find(c.rest()) {
        c.pos += m.end();
    }
    let mut bangs = 0;
    while matches!(c.peek(), Some(b'!' | b' ' | b'\t')) {
        bangs += usize::from(c.peek() == Some(b'!'));
        c.bump();
    }
    let negated = bangs % 2 == 1;

    let word_end =
        |c: &Cursor, n: usize| matches!(c.peek_at(n), None | Some(b' ' | b'\t' | b',' | b':'));
    let cmnd = if c.rest().starts_with("ALL") && word_end(c, 3) {
        c.pos += 3;
        Cmnd::All
    } else if c.rest().starts_with("sudoedit") && word_end(c, 8) {
        c.pos += 8;
        Cmnd::Sudoedit(parse_args(c, whole))
    } else {
        match c.peek() {
            None => return Err("missing command".into()),
            Some(b'^') => {
                let path = read_regex(c).to_string();
                Cmnd::Path {
                    path,
                    args: parse_args(c, whole),
                }
            }
            Some(b'A'..=b'Z') if is_alias_name(alias_prefix(c.rest())) => {
                let name = alias_prefix(c.rest()).to_string();
                c.pos += name.len();
                Cmnd::Alias(name)
            }
            Some(_) => {
                // A path (or, wrongly, a relative name): up to an unescaped `,:= \t#`.
                let path =
                    read_unescaped(c, |b| matches!(b, b',' | b':' | b'=' | b' ' | b'\t' | b'#'));
                if path.is_empty() {
                    return Err(format!("expected a command, found `{}`", c.rest()));
                }
                // A directory (`/usr/bin/`) takes no arguments.
                let args = if path.ends_with('/') {
                    Args::Any
                } else {
                    parse_args(c, whole)
                };
                Cmnd::Path { path, args }
            }
        }
    };
    Ok(Item {
        runas,
        tags,
        options,
        negated,
        cmnd,
    })
}

pub(super) fn alias_prefix(s: &str) -> &str {
    let n = s
        .find(|ch: char| !(ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '_'))
        .unwrap_or(s.len());
    &s[..n]
}

pub(super) fn parse_args(c: &mut Cursor, whole: bool) -> Args {
    c.skip_blanks();
    match c.peek() {
        None => return Args::Any,
        Some(b',' | b':') if !whole => return Args::Any,
        Some(b'^') => {
            let start = c.pos;
            let re = read_regex(c);
            if !(re.len() > 1 && re.ends_with('$') && c.pos > start) {
                return Args::Unterminated(re.to_string());
            }
            // sudo's regex token ends at the first unescaped `$`: whatever follows before the
            // next command is not part of it.
            let rest_start = c.pos;
            let stop = |b: u8| !whole && matches!(b, b',' | b':');
            let mut end = rest_start;
            while end < c.s.len() && !stop(c.s.as_bytes()[end]) {
                end += 1;
            }
            if !c.s[rest_start..end].trim().is_empty() {
                let after = c.s[rest_start..end].trim().to_string();
                c.pos = end;
                return Args::EarlyDollar(re.to_string(), after);
            }
            return Args::Regex(re.to_string());
        }
        _ => {}
    }
    let raw = if whole {
        let r = c.rest().to_string();
        c.pos = c.s.len();
        r
    } else {
        read_unescaped(c, |b| matches!(b, b',' | b':' | b'='))
    };
    // sudo keeps one blank between words, whatever the spacing in the file.
    let joined = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined == "\"\"" {
        Args::Empty
    } else if joined.is_empty() {
        Args::Any
    } else {
        Args::Glob(joined)
    }
}

/// Read `^…$` up to the first unescaped `$` (sudo's regex token), or to the end.
pub(super) fn read_regex<'a>(c: &mut Cursor<'a>) -> &'a str {
    let start = c.pos;
    let b = c.s.as_bytes();
    let mut i = c.pos;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'$' => {
                i += 1;
                break;
            }
            _ => i += 1,
        }
    }
    c.pos = i.min(b.len());
    &c.s[start..c.pos]
}

/// Read up to an unescaped stop byte; `\` before `,:=#` and blanks is removed (sudo's
/// "quoted sudoers special char"), before anything else it is kept (a glob escape).
pub(super) fn read_unescaped(c: &mut Cursor, stop: impl Fn(u8) -> bool) -> String {
    let b = c.s.as_bytes();
    let mut out = String::new();
    let mut i = c.pos;
    let mut seg = i;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            if matches!(b[i + 1], b',' | b':' | b'=' | b'#' | b' ' | b'\t' | b'\\') {
                out.push_str(&c.s[seg..i]);
                seg = i + 1;
            }
            i += 2;
            continue;
        }
        if stop(b[i]) {
            break;
        }
        i += 1;
    }
    out.push_str(&c.s[seg..i]);
    c.pos = i;
    out.trim_end().to_string()
}

// ---------------------------------------------------------------------------------------
// Aliases and Defaults lookup
// ---------------------------------------------------------------------------------------

#[derive(Debug, Default)]
pub(super) struct Aliases {
    pub(super) cmnd: HashMap<String, Vec<Item>>,
    pub(super) user: HashMap<String, Vec<String>>,
    pub(super) runas: HashMap<String, Vec<String>>,
}

impl Aliases {
    pub(super) fn collect(entries: &[(Logical, Result<Entry, String>)]) -> Aliases {
        let mut a = Aliases::default();
        for (_, e) in entries {
            match e {
                Ok(Entry::CmndAlias(defs)) => {
                    for (name, items) in defs {
                        a.cmnd.insert(name.clone(), items.clone());
                    }
                }
                Ok(Entry::NameAlias { kind, defs }) => {
                    let map = match kind {
                        NameKind::User => &mut a.user,
                        NameKind::Runas => &mut a.runas,
                        NameKind::Host => continue,
                    };
                    for (name, members) in defs {
                        map.insert(name.clone(), members.clone());
                    }
                }
                _ => {}
            }
        }
        a
    }

    /// The leaf commands a use of `name` reaches, each with where it is written (alias and
    /// index) and whether it is granted after all the `!`s on the way (`negated` starts with
    /// the use's own): `!ALIAS` of a member `!cmd` grants `cmd`. Nested aliases are followed,
    /// cycles cut; `None` when `name` is not defined.
    pub(super) fn expand_signed(
        &self,
        name: &str,
        negated: bool,
    ) -> Option<Vec<(String, usize, Item, bool)>> {
        fn walk(
            a: &Aliases,
            name: &str,
            negated: bool,
            seen: &mut HashSet<String>,
            out: &mut Vec<(String, usize, Item, bool)>,
        ) -> bool {
            let Some(items) = a.cmnd.get(name) else {
                return false;
            };
            if !seen.insert(name.to_string()) {
                return true;
            }
            for (i, it) in items.iter().enumerate() {
                let net = negated != it.negated;
                match &it.cmnd {
                    Cmnd::Alias(inner) => {
                        walk(a, inner, net, seen, out);
                    }
                    _ => out.push((name.to_string(), i, it.clone(), !net)),
                }
            }
            seen.remove(name);
            true
        }
        let mut out = Vec::new();
        walk(self, name, negated, &mut HashSet::new(), &mut out).then_some(out)
    }

    /// Whether a name list (users or runas) contains `who`, through aliases.
    pub(super) fn names_contain(
        map: &HashMap<String, Vec<String>>,
        list: &[String],
        who: &str,
    ) -> bool {
        fn walk(
            map: &HashMap<String, Vec<String>>,
            list: &[String],
            who: &str,
            depth: usize,
        ) -> bool {
            depth < 16
                && list.iter().any(|n| {
                    !n.starts_with('!')
                        && (n == who
                            || n == "ALL"
                            || map.get(n).is_some_and(|m| walk(map, m, who, depth + 1)))
                })
        }
        walk(map, list, who, 0)
    }

    pub(super) fn expand_users(&self, users: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack: Vec<(String, usize)> = users.iter().rev().map(|u| (u.clone(), 0)).collect();
        while let Some((u, depth)) = stack.pop() {
            match self.user.get(&u) {
                Some(members) if depth < 16 => {
                    stack.extend(members.iter().rev().map(|m| (m.clone(), depth + 1)))
                }
                _ if !u.starts_with('!') && !out.contains(&u) => out.push(u),
                _ => {}
            }
        }
        out
    }
}

/// What a rule's Defaults look like for the account judged.
pub(super) struct Env<'a> {
    pub(super) aliases: &'a Aliases,
    pub(super) defaults: &'a [&'a DefaultsEntry],
    /// The account the findings are for (`--user`).
    pub(super) who: &'a Principal,
}

impl Env<'_> {
    /// The value of a boolean Defaults option for `user` running commands as root, as sudo
    /// resolves it: generic, then `@host`, then `:user`, then `>runas` Defaults, later ones
    /// of a class overriding earlier ones. Command-bound Defaults are left out (they apply
    /// to some commands only and are reported on their own line).
    pub(super) fn flag(&self, name: &str, default: bool) -> bool {
        let mut best: Option<(u8, bool)> = None;
        for d in self.defaults {
            let tier = match d.binding {
                Binding::Global => 0,
                Binding::Host => 1,
                Binding::User if self.aliases.users_apply(&d.targets, self.who) => 2,
                Binding::Runas
                    if Aliases::names_contain(&self.aliases.runas, &d.targets, "root") =>
                {
                    3
                }
                _ => continue,
            };
            for o in d.options.iter().filter(|o| o.name == name) {
                if best.is_none_or(|(t, _)| tier >= t) {
                    best = Some((tier, !o.negated));
                }
            }
        }
        best.map_or(default, |(_, v)| v)
    }

    /// Whether a Defaults entry can change anything for the account judged: not when it is
    /// bound to other users, or to running as users other than root.
    pub(super) fn defaults_apply(&self, d: &DefaultsEntry) -> bool {
        match d.binding {
            Binding::User => self.aliases.users_apply(&d.targets, self.who),
            Binding::Runas => Aliases::names_contain(&self.aliases.runas, &d.targets, "root"),
            _ => true,
        }
    }
}
