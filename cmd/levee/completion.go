package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// command is one levee subcommand as the shell completions know it.
type command struct {
	name, summary string
	// flags returns the command's flag set (the one the command parses),
	// nil for none.
	flags func() *flag.FlagSet
	// subs are "levee apps"'s commands, each with its flag set.
	subs []string
	sub  func(name string) *flag.FlagSet
	// words are the positional words offered (completion's shells).
	words []string
}

// commands lists levee's subcommands in usage's order;
// TestCommandsMatchUsage holds it to the usage text and to run's
// dispatch, so a new command cannot miss its completion.
var commands = []command{
	{name: "run", summary: "serve a configuration file", flags: func() *flag.FlagSet { fs, _ := configFlagSet("run"); return fs }},
	{name: "validate", summary: "check a configuration file", flags: func() *flag.FlagSet { fs, _ := configFlagSet("validate"); return fs }},
	{name: "demo", summary: "serve a built-in demo", flags: func() *flag.FlagSet { fs, _, _, _ := demoFlagSet(); return fs }},
	{name: "apps", summary: "manage consumer apps through the admin API", subs: appsCommands,
		sub: func(name string) *flag.FlagSet { fs, _, _, _ := appsFlagSet(name); return fs }},
	{name: "drill", summary: "replay the seed outages against a running levee", subs: drillCommands,
		sub: func(name string) *flag.FlagSet { fs, _ := drillFlagSet(name); return fs }},
	{name: "completion", summary: "print a shell completion script", words: shells},
	{name: "data-apis", summary: "manage data APIs' lifecycle through the admin API", subs: dataAPIsCommands,
		sub: func(name string) *flag.FlagSet { fs, _ := dataAPIsFlagSet(name); return fs }},
	{name: "version", summary: "print the version"},
}

// shells are the shells `levee completion` writes a script for.
var shells = []string{"bash", "zsh", "fish"}

// fileFlags take a file name (completed as one); the other value flags
// take free text.
var fileFlags = []string{"config", "token-file"}

// flagNames returns fs's flags as "-name", sorted, and the subset that
// take a value (not booleans).
func flagNames(fs *flag.FlagSet) (all, valued []string) {
	if fs == nil {
		return nil, nil
	}
	fs.VisitAll(func(f *flag.Flag) {
		all = append(all, "-"+f.Name)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			valued = append(valued, "-"+f.Name)
		}
	})
	return all, valued
}

// cmdCompletion runs "levee completion SHELL".
func cmdCompletion(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || !slices.Contains(shells, args[0]) {
		fmt.Fprintf(stderr, "usage: levee completion %s\n", strings.Join(shells, "|"))
		return 2
	}
	switch args[0] {
	case "bash":
		fmt.Fprint(stdout, bashCompletion())
	case "zsh":
		// zsh runs the bash function through bashcompinit, which ships
		// with zsh: one script to keep right rather than two.
		fmt.Fprint(stdout, "#compdef levee\n# levee completion for zsh: eval \"$(levee completion zsh)\" or save it as _levee in $fpath\n"+
			"autoload -U +X bashcompinit && bashcompinit\n"+bashCompletion())
	case "fish":
		fmt.Fprint(stdout, fishCompletion())
	}
	return 0
}

// bashCompletion returns the bash script (complete -F _levee levee).
func bashCompletion() string {
	var b strings.Builder
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	fmt.Fprintf(&b, `# levee completion for bash: source <(levee completion bash)
_levee() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} words=""
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W %q -- "$cur"))
        return
    fi
    case "$prev" in
        -%s) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    esac
    case "${COMP_WORDS[1]}" in
`, strings.Join(names, " "), strings.Join(fileFlags, "|-"))
	for _, c := range commands {
		fmt.Fprintf(&b, "        %s)\n", c.name)
		if c.subs != nil {
			fmt.Fprintf(&b, "            if [[ $COMP_CWORD -eq 2 ]]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(c.subs, " "))
			b.WriteString("            case \"${COMP_WORDS[2]}\" in\n")
			for _, s := range c.subs {
				all, _ := flagNames(c.sub(s))
				fmt.Fprintf(&b, "                %s) words=%q ;;\n", s, strings.Join(all, " "))
			}
			b.WriteString("            esac ;;\n")
			continue
		}
		all, _ := flagNames(flagsOf(c))
		fmt.Fprintf(&b, "            words=%q ;;\n", strings.Join(append(all, c.words...), " "))
	}
	b.WriteString(`    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _levee levee
`)
	return b.String()
}

// flagsOf returns c's flag set, nil when it has none.
func flagsOf(c command) *flag.FlagSet {
	if c.flags == nil {
		return nil
	}
	return c.flags()
}

// fishCompletion returns the fish script (complete -c levee ...).
func fishCompletion() string {
	var b strings.Builder
	b.WriteString("# levee completion for fish: levee completion fish | source\ncomplete -c levee -f\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "complete -c levee -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
	}
	flagLines := func(cond string, fs *flag.FlagSet) {
		all, valued := flagNames(fs)
		for _, f := range all {
			name := strings.TrimPrefix(f, "-")
			opt := ""
			switch {
			case slices.Contains(fileFlags, name):
				opt = " -r -F"
			case slices.Contains(valued, f):
				opt = " -x"
			}
			fmt.Fprintf(&b, "complete -c levee -n %s -o %s%s\n", fishQuote(cond), name, opt)
		}
	}
	for _, c := range commands {
		in := "__fish_seen_subcommand_from " + c.name
		if c.subs != nil {
			subs := strings.Join(c.subs, " ")
			fmt.Fprintf(&b, "complete -c levee -n %s -a %s\n", fishQuote(in+"; and not __fish_seen_subcommand_from "+subs), fishQuote(subs))
			for _, s := range c.subs {
				flagLines(in+"; and __fish_seen_subcommand_from "+s, c.sub(s))
			}
			continue
		}
		flagLines(in, flagsOf(c))
		if len(c.words) > 0 {
			fmt.Fprintf(&b, "complete -c levee -n %s -a %s\n", fishQuote(in), fishQuote(strings.Join(c.words, " ")))
		}
	}
	return b.String()
}

// fishQuote single-quotes s for fish.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
