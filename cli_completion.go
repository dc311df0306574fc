package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// korvet completion bash|zsh|fish: completion scripts. The scripts are
// written by hand per shell; the word lists (nouns, verbs, flags) come from
// the command table, so that they cannot drift from what korvet accepts.
// Topic and group names are completed by asking korvet (korvet topics list
// --output names), with the --config/--url already on the command line.

const completionUsage = `usage: korvet completion bash|zsh|fish

Prints a completion script. Install it with, for example:
  bash:  korvet completion bash > /etc/bash_completion.d/korvet
         (or: source <(korvet completion bash) in ~/.bashrc)
  zsh:   korvet completion zsh > "${fpath[1]}/_korvet"
  fish:  korvet completion fish > ~/.config/fish/completions/korvet.fish
`

// topCommands are korvet's first words besides the admin nouns.
var topCommands = []string{"serve", "index", "user", "completion", "version", "help"}

func runCompletion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, completionUsage)
		return exitOK
	}
	if len(args) != 1 {
		fmt.Fprint(stderr, completionUsage)
		return exitUsage
	}
	var script string
	switch args[0] {
	case "bash":
		script = bashCompletion()
	case "zsh":
		script = zshCompletion()
	case "fish":
		script = fishCompletion()
	default:
		fmt.Fprintf(stderr, "korvet completion: unknown shell %q\n\n%s", args[0], completionUsage)
		return exitUsage
	}
	fmt.Fprint(stdout, script)
	return exitOK
}

// verbFlags lists a verb's flags, common ones included, as --name.
func verbFlags(v cliVerb) []string {
	var fs []string
	for name := range v.flags {
		fs = append(fs, "--"+name)
	}
	for name := range commonFlags {
		fs = append(fs, "--"+name)
	}
	sort.Strings(fs)
	return append(fs, "--help")
}

func firstWords() []string {
	w := append([]string{}, topCommands...)
	for _, n := range cliNouns() {
		w = append(w, n.name)
	}
	return w
}

func verbNames(n cliNoun) []string {
	var vs []string
	for _, v := range n.verbs {
		vs = append(vs, v.name)
	}
	return vs
}

// outputsOf is every --output value some verb takes.
const completionOutputs = "table json names"

func bashCompletion() string {
	var b strings.Builder
	b.WriteString(`# bash completion for korvet; source <(korvet completion bash)
_korvet_names() {
    # $1: topics or groups; the --config/--url/--user given so far.
    local i conn=()
    for ((i = 1; i < ${#COMP_WORDS[@]} - 1; i++)); do
        case "${COMP_WORDS[i]}" in
            --config|--url) conn+=("${COMP_WORDS[i]}" "${COMP_WORDS[i+1]}") ;;
        esac
    done
    korvet "$1" list --output names "${conn[@]}" 2>/dev/null </dev/null
}

_korvet() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local noun="${COMP_WORDS[1]}" verb="${COMP_WORDS[2]}" words="" names=""
    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "` + strings.Join(firstWords(), " ") + `" -- "$cur"))
        return
    fi
    case "$prev" in
        --config) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --output) COMPREPLY=($(compgen -W "` + completionOutputs + `" -- "$cur")); return ;;
        --topic) COMPREPLY=($(compgen -W "$(_korvet_names topics)" -- "$cur")); return ;;
        --group) COMPREPLY=($(compgen -W "$(_korvet_names groups)" -- "$cur")); return ;;
        --mechanism) COMPREPLY=($(compgen -W "SCRAM-SHA-256 SCRAM-SHA-512 all" -- "$cur")); return ;;
        --to) COMPREPLY=($(compgen -W "earliest latest timestamp: offset:" -- "$cur")); return ;;
        --operation) COMPREPLY=($(compgen -W "read write create delete alter describe describe_configs alter_configs cluster_action idempotent_write all" -- "$cur")); return ;;
        --pattern) COMPREPLY=($(compgen -W "literal prefixed any match" -- "$cur")); return ;;
    esac
    case "$noun" in
        serve) words="--config" ;;
        index) [[ $COMP_CWORD -eq 2 ]] && words="rebuild verify" || words="--config --topic" ;;
        user) [[ $COMP_CWORD -eq 2 ]] && words="add delete list" || words="--config --mechanism --iterations" ;;
        completion) [[ $COMP_CWORD -eq 2 ]] && words="bash zsh fish" ;;
`)
	for _, n := range cliNouns() {
		fmt.Fprintf(&b, "        %s)\n            if [[ $COMP_CWORD -eq 2 ]]; then words=%q; else case \"$verb\" in\n", n.name, strings.Join(append(verbNames(n), "--help"), " "))
		for _, v := range n.verbs {
			fmt.Fprintf(&b, "                %s) words=%q; names=%q ;;\n", v.name, strings.Join(verbFlags(v), " "), v.names)
		}
		b.WriteString("            esac; fi ;;\n")
	}
	b.WriteString(`    esac
    if [[ $cur != -* && -n $names ]]; then
        words="$(_korvet_names "$names")"
    fi
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _korvet korvet
`)
	return b.String()
}

func zshCompletion() string {
	var b strings.Builder
	b.WriteString(`#compdef korvet
# zsh completion for korvet; save as _korvet in a directory of $fpath,
# or source <(korvet completion zsh) after compinit.
_korvet_names() {
    local -a conn
    local i
    for ((i = 2; i < CURRENT; i++)); do
        case ${words[i]} in
            --config|--url) conn+=(${words[i]} ${words[i+1]}) ;;
        esac
    done
    korvet $1 list --output names $conn 2>/dev/null </dev/null
}

_korvet() {
    local noun=${words[2]} verb=${words[3]} names=""
    local -a list
    if (( CURRENT == 2 )); then
        list=(` + strings.Join(firstWords(), " ") + `)
        compadd -a list; return
    fi
    case ${words[CURRENT-1]} in
        --config) _files; return ;;
        --output) compadd ` + completionOutputs + `; return ;;
        --topic) compadd -- ${(f)"$(_korvet_names topics)"}; return ;;
        --group) compadd -- ${(f)"$(_korvet_names groups)"}; return ;;
        --mechanism) compadd SCRAM-SHA-256 SCRAM-SHA-512 all; return ;;
        --to) compadd earliest latest timestamp: offset:; return ;;
        --operation) compadd read write create delete alter describe describe_configs alter_configs cluster_action idempotent_write all; return ;;
        --pattern) compadd literal prefixed any match; return ;;
    esac
    case $noun in
        serve) list=(--config) ;;
        index) if (( CURRENT == 3 )); then list=(rebuild verify); else list=(--config --topic); fi ;;
        user) if (( CURRENT == 3 )); then list=(add delete list); else list=(--config --mechanism --iterations); fi ;;
        completion) (( CURRENT == 3 )) && list=(bash zsh fish) ;;
`)
	for _, n := range cliNouns() {
		fmt.Fprintf(&b, "        %s)\n            if (( CURRENT == 3 )); then list=(%s); else case $verb in\n", n.name, strings.Join(append(verbNames(n), "--help"), " "))
		for _, v := range n.verbs {
			fmt.Fprintf(&b, "                %s) list=(%s); names=%q ;;\n", v.name, strings.Join(verbFlags(v), " "), v.names)
		}
		b.WriteString("            esac; fi ;;\n")
	}
	b.WriteString(`    esac
    if [[ $PREFIX != -* && -n $names ]]; then
        list=(${(f)"$(_korvet_names $names)"})
    fi
    compadd -a list
}

if [[ $funcstack[1] == _korvet ]]; then
    _korvet "$@"
else
    compdef _korvet korvet
fi
`)
	return b.String()
}

func fishCompletion() string {
	var b strings.Builder
	nouns := cliNouns()
	b.WriteString(`# fish completion for korvet; save as ~/.config/fish/completions/korvet.fish
function __korvet_names
    set -l conn
    set -l toks (commandline -opc)
    for i in (seq (count $toks))
        if contains -- $toks[$i] --config --url; and test $i -lt (count $toks)
            set conn $conn $toks[$i] $toks[(math $i + 1)]
        end
    end
    korvet $argv[1] list --output names $conn 2>/dev/null </dev/null
end

complete -c korvet -f
complete -c korvet -n __fish_use_subcommand -a "` + strings.Join(firstWords(), " ") + `"
complete -c korvet -n "__fish_seen_subcommand_from index; and not __fish_seen_subcommand_from rebuild verify" -a "rebuild verify"
complete -c korvet -n "__fish_seen_subcommand_from user; and not __fish_seen_subcommand_from add delete list" -a "add delete list"
complete -c korvet -n "__fish_seen_subcommand_from completion" -a "bash zsh fish"
complete -c korvet -l config -r -F -d "korvet.toml"
complete -c korvet -l output -x -a "` + completionOutputs + `"
complete -c korvet -l topic -x -a "(__korvet_names topics)"
complete -c korvet -l group -x -a "(__korvet_names groups)"
complete -c korvet -l mechanism -x -a "SCRAM-SHA-256 SCRAM-SHA-512 all"
`)
	for _, n := range nouns {
		verbs := strings.Join(verbNames(n), " ")
		fmt.Fprintf(&b, "complete -c korvet -n \"__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s\" -a %q -d %q\n", n.name, verbs, verbs, n.summary)
		for _, v := range n.verbs {
			cond := fmt.Sprintf("__fish_seen_subcommand_from %s; and __fish_seen_subcommand_from %s", n.name, v.name)
			for _, f := range verbFlags(v) {
				switch name := strings.TrimPrefix(f, "--"); name {
				case "config", "output", "topic", "group", "mechanism":
				default:
					fmt.Fprintf(&b, "complete -c korvet -n %q -l %s\n", cond, name)
				}
			}
			if v.names != "" {
				fmt.Fprintf(&b, "complete -c korvet -n %q -a \"(__korvet_names %s)\"\n", cond, v.names)
			}
		}
	}
	return b.String()
}
