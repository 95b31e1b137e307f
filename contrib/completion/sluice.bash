# bash completion for sluice(1)                              -*- shell-script -*-
# Installed as $datadir/bash-completion/completions/sluice; works without the
# bash-completion package too (source this file).

_sluice_commands="mount run land status files check"

# -o values of sluice mount: sluice's own, then common libfuse/kernel ones.
_sluice_mount_opts="land=rename land=close temp= sparkroot= allow_other allow_root auto_unmount
default_permissions suid nosuid dev nodev"

# Prints the query names of DATA_DIR/sluice.json, one a line: with jq when it
# is installed, else with a small tokenizer (keys of the "queries" object).
# sluice files --query completes with them.
_sluice_queries()
{
	local dir=${1/#\~/$HOME} f
	f=$dir/sluice.json
	[[ -r $f ]] || return 0
	if command -v jq >/dev/null 2>&1; then
		jq -r '(.queries // {}) | keys_unsorted[]' "$f" 2>/dev/null
		return 0
	fi
	# tokens: strings (a key when followed by ':') and braces, so that a brace
	# inside a string does not count
	grep -oE '"([^"\\]|\\.)*"[[:space:]]*:?|[{}]' "$f" 2>/dev/null | awk '
		/^[{]$/ { depth++; opened[depth] = pending; pending = ""; next }
		/^[}]$/ { depth--; next }
		/:$/ {
			k = $0; sub(/[[:space:]]*:$/, "", k); k = substr(k, 2, length(k) - 2)
			if (depth == 2 && opened[2] == "queries") print k
			pending = k; next
		}
		{ pending = "" }'
}

# Completes COMPREPLY with folders (kind d) or files (kind f) matching cur.
_sluice_paths()
{
	local kind=$1 cur=$2
	compopt -o filenames 2>/dev/null
	local IFS=$'\n'
	COMPREPLY=($(compgen -"$kind" -- "$cur"))
}

# Sets words and cword from COMP_WORDS, joining what readline split at '='
# and ':' (COMP_WORDBREAKS): "-o temp=*.tmp" stays one word.
_sluice_words()
{
	words=()
	cword=0
	local i w join=0
	for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
		w=${COMP_WORDS[i]}
		if ((i > 0)) && { [[ $w == "=" || $w == ":" ]] || ((join)); }; then
			words[${#words[@]} - 1]+=$w
			[[ $w == "=" || $w == ":" ]] && join=1 || join=0
		else
			words+=("$w")
			join=0
		fi
		((i == COMP_CWORD)) && cword=$((${#words[@]} - 1))
	done
	((COMP_CWORD >= ${#COMP_WORDS[@]})) && { words+=(""); cword=$((${#words[@]} - 1)); }
	return 0
}

_sluice()
{
	local words cword
	_sluice_words
	local cur=${words[cword]} prev=
	((cword > 0)) && prev=${words[cword - 1]}
	COMPREPLY=()

	# the command: the first word after "sluice" that is not an option
	local cmd= i ci=0
	for ((i = 1; i < cword; i++)); do
		if [[ ${words[i]} != -* ]]; then
			cmd=${words[i]}
			ci=$i
			break
		fi
	done
	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--help --version" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$_sluice_commands help" -- "$cur"))
		fi
		return 0
	fi

	# the option values
	case $cmd:$prev in
	mount:-o)
		# a comma-separated list: complete its last item
		local head= item=$cur
		if [[ $cur == *,* ]]; then
			head=${cur%,*},
			item=${cur##*,}
		fi
		local o
		for o in $(compgen -W "$_sluice_mount_opts" -- "$item"); do
			COMPREPLY+=("$head$o")
		done
		[[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
		# readline replaces only the text after the last '=' or ':' in cur
		local before=${cur%"${cur##*[=:]}"}
		if [[ -n $before ]]; then
			for i in "${!COMPREPLY[@]}"; do
				COMPREPLY[i]=${COMPREPLY[i]#"$before"}
			done
		fi
		return 0
		;;
	land:--to)
		return 0 # a folder under DATA_DIR's in/, which is not a local folder
		;;
	files:--query)
		# the queries of the DATA_DIR given so far (the first positional word)
		local d=
		for ((i = ci + 1; i < cword - 1; i++)); do
			[[ ${words[i]} == --query ]] && { i=$((i + 1)); continue; }
			[[ ${words[i]} != -* ]] && { d=${words[i]}; break; }
		done
		[[ -n $d ]] && COMPREPLY=($(compgen -W "$(_sluice_queries "$d")" -- "$cur"))
		return 0
		;;
	esac

	# how many positional arguments come before cur
	local npos=0 skip=0
	for ((i = ci + 1; i < cword; i++)); do
		if ((skip)); then
			skip=0
			continue
		fi
		case $cmd:${words[i]} in
		mount:-o | land:--to | files:--query) skip=1 ;;
		*:-*) ;;
		*) npos=$((npos + 1)) ;;
		esac
	done

	if [[ $cur == -* ]]; then
		local opts
		case $cmd in
		mount) opts="-f --foreground -d -o --help" ;;
		run) opts="--available-now --help" ;;
		land) opts="--to --help" ;;
		status) opts="--json --watch --prometheus --help" ;;
		files) opts="--json --query --help" ;;
		check) opts="--help" ;;
		*) opts="" ;;
		esac
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return 0
	fi

	case $cmd in
	mount)
		# DATA_DIR, then MOUNTPOINT
		((npos < 2)) && _sluice_paths d "$cur"
		;;
	run | status | check)
		((npos < 1)) && _sluice_paths d "$cur"
		;;
	files)
		# DATA_DIR; then PATH|GLOB is a path under its in/, not a local one
		((npos < 1)) && _sluice_paths d "$cur"
		;;
	land)
		# DATA_DIR, then the files to land
		if ((npos < 1)); then
			_sluice_paths d "$cur"
		else
			_sluice_paths f "$cur"
		fi
		;;
	esac
	return 0
}

complete -F _sluice sluice
