#!/usr/bin/env bash
# scripts/regen.sh — regenerate, from the built binary, the files the repository carries that
# come from the catalog: nothing in them is pasted by hand.
#
#   scripts/regen.sh           # rewrite the stale ones
#   scripts/regen.sh --check   # change nothing; exit 1 naming each stale file (scripts/test.sh,
#                              # and so CI, runs this)
#
# The generated files:
#   templates/zen-agent-sudoers   = `pxagent sudoers render` (the default profile, no fences)
#   tests/fixtures/sudoers/corpus/safe/render-*.sudoers = `pxagent sudoers render` of every
#                                   profile and fence (the lint corpus's own renders)
#   docs/agents-and-mcp.md, between the lines `<!-- BEGIN generated: mcp-tools -->` and
#   `<!-- END generated: mcp-tools -->`: the MCP tool table, from `pxagent mcp --list-tools`
#   (one tool a line: name, risk, description, tab-separated; `|` is escaped for markdown)
#   skills/pxagent/SKILL.md      = `pxagent skill` (the agent skill, profile full)
# The binary is PXAGENT_BIN, else `cargo build --locked --release -p pxagent` of this repository.
# It runs with an empty environment and a throwaway HOME, so no config file, policy or
# PXAGENT_* variable of the caller's can change what it prints.
# Exit: 0 up to date (or rewritten), 1 stale (--check), 2 the generator itself failed.
set -euo pipefail
cd "$(dirname "$0")/.."

CHECK=0
case "${1:-}" in
"") ;;
--check) CHECK=1 ;;
-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
*) echo "scripts/regen.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

die() {
    echo "scripts/regen.sh: $*" >&2
    exit 2
}

readonly SUDOERS_FILE=templates/zen-agent-sudoers
readonly TOOLS_DOC=docs/agents-and-mcp.md
readonly BEGIN_MARK='<!-- BEGIN generated: mcp-tools -->'
readonly END_MARK='<!-- END generated: mcp-tools -->'

if [[ -z "${PXAGENT_BIN:-}" ]]; then
    DEPS_WHO=scripts/regen.sh
    # shellcheck source=scripts/lib/deps.sh
    . scripts/lib/deps.sh
    deps_rust
    cargo build --locked --release --quiet -p pxagent || die "cargo build --locked --release -p pxagent failed"
    PXAGENT_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/pxagent"
fi
[[ -x "$PXAGENT_BIN" ]] || die "no pxagent binary at $PXAGENT_BIN"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/home"
px() {
    env -i PATH=/usr/bin:/bin HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" \
        XDG_STATE_HOME="$WORK/home/.local/state" "$PXAGENT_BIN" "$@"
}

# templates/zen-agent-sudoers
px sudoers render >"$WORK/sudoers" || die "'pxagent sudoers render' failed"
[[ -s "$WORK/sudoers" ]] || die "'pxagent sudoers render' printed nothing"

# The lint corpus's renders: name, then the arguments of `pxagent sudoers render`.
readonly CORPUS=tests/fixtures/sudoers/corpus/safe
readonly RENDERS='render-readonly --profile readonly
render-operator --profile operator
render-full --profile full
render-full-vmids --profile full --vmids 100-199,250
render-operator-vmids-ctids --profile operator --vmids 100-199 --ctids 200-299
render-full-ct-exec-unfenced-ops --profile full --vmids 100-199 --ctids 200-299 --ct-exec 200-209 --unfenced-ops
render-readonly-ct-exec --profile readonly --ct-exec 300'
mkdir -p "$WORK/corpus"
while read -r name args; do
    # shellcheck disable=SC2086 # the arguments are words
    px sudoers render $args >"$WORK/corpus/$name.sudoers" || die "'pxagent sudoers render $args' failed"
done <<<"$RENDERS"

# The MCP tool table of docs/agents-and-mcp.md
px mcp --list-tools >"$WORK/tools" || die "'pxagent mcp --list-tools' failed"
{
    echo '| tool | risk | description (what the model reads) |'
    echo '|---|---|---|'
    n=0
    while IFS=$'\t' read -r name risk desc rest; do
        [[ -n "$name" && -n "$risk" && -n "$desc" && -z "$rest" ]] ||
            die "'pxagent mcp --list-tools' printed a line that is not name<TAB>risk<TAB>description: $name $risk $desc $rest"
        # shellcheck disable=SC2016 # the backquotes are markdown
        printf '| `%s` | %s | %s |\n' "${name//|/\\|}" "${risk//|/\\|}" "${desc//|/\\|}"
        n=$((n + 1))
    done <"$WORK/tools"
    [[ $n -gt 0 ]] || die "'pxagent mcp --list-tools' listed no tools"
} >"$WORK/table"

[[ "$(grep -cxF -- "$BEGIN_MARK" "$TOOLS_DOC")" == 1 && "$(grep -cxF -- "$END_MARK" "$TOOLS_DOC")" == 1 ]] ||
    die "$TOOLS_DOC must hold the lines '$BEGIN_MARK' and '$END_MARK' once each"
awk -v begin="$BEGIN_MARK" -v end="$END_MARK" -v table="$WORK/table" '
    $0 == begin { print; while ((getline line < table) > 0) print line; inside = 1; next }
    $0 == end { if (!inside) exit 3; inside = 0 }
    !inside { print }
    END { if (inside) exit 3 }
' "$TOOLS_DOC" >"$WORK/tools_doc" || die "$TOOLS_DOC: '$END_MARK' must follow '$BEGIN_MARK'"

# The agent skill (skills/pxagent/SKILL.md)
readonly SKILL_FILE=skills/pxagent/SKILL.md
px skill >"$WORK/skill" || die "'pxagent skill' failed"
[[ -s "$WORK/skill" ]] || die "'pxagent skill' printed nothing"

STALE=0
update() { # update GENERATED COMMITTED WHAT
    if cmp -s "$1" "$2"; then
        echo "scripts/regen.sh: $2 is up to date"
    elif [[ $CHECK -eq 1 ]]; then
        echo "scripts/regen.sh: $2 is stale: it differs from $3; run scripts/regen.sh (then commit it)" >&2
        diff -u "$2" "$1" | head -n 40 >&2 || true
        STALE=1
    else
        cat "$1" >"$2"
        echo "scripts/regen.sh: regenerated $2 from $3"
    fi
}
# shellcheck disable=SC2016 # the backquotes are markdown
update "$WORK/sudoers" "$SUDOERS_FILE" '`pxagent sudoers render`'
# shellcheck disable=SC2016
update "$WORK/skill" "$SKILL_FILE" '`pxagent skill`'
# shellcheck disable=SC2016
update "$WORK/tools_doc" "$TOOLS_DOC" 'the MCP tool table of `pxagent mcp --list-tools` (between the mcp-tools markers)'
while read -r name args; do
    # shellcheck disable=SC2016
    update "$WORK/corpus/$name.sudoers" "$CORPUS/$name.sudoers" "\`pxagent sudoers render $args\`"
done <<<"$RENDERS"
exit "$STALE"
