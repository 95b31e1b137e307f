#!/usr/bin/env python3
"""The man pages (doc/*.scd) and the bash completion against the binary's
--help: the commands `sluice --help` lists are the ones sluice.1 describes;
for every command, the options `sluice <cmd> --help` prints are the options
sluice.1 documents for it, and the other way round; mount.sluice.8 covers the
helper's options; the exit codes match; contrib/completion/sluice.bash parses
and completes the same commands and options.

    manpages.py SOURCE_ROOT SLUICE_BINARY   prints "ok   manpages: <check>" or
                                            "FAIL manpages: <check>" lines;
                                            exit 77 when doc/ is missing
"""

import os
import re
import subprocess
import sys
import tempfile

OPT = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
results = []


def check(name, problems):
    results.append((name, problems))


def run(args, argv0=None):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=30, executable=argv0)
    return p.returncode, p.stdout


# --help parsing

def help_commands(text):
    """The command names `sluice --help` lists ("  name   summary")."""
    return [m.group(1) for m in re.finditer(r"^  ([a-z][\w-]*)\s{2,}\S", text, re.M)]


def help_global_options(text):
    """Options `sluice --help` mentions outside its list of commands."""
    lines = [l for l in text.splitlines() if not re.match(r"^  [a-z][\w-]*\s{2,}\S", l)]
    return set(OPT.findall("\n".join(lines)))


def help_options(text):
    """A command's options: those of its usage line and the heads of the
    lines that define options ("  -o land=rename  description"). libfuse's
    list, which `sluice mount --help` appends, is libfuse's."""
    text = text.split("libfuse options", 1)[0]
    opts, keys = set(), set()
    for line in text.splitlines():
        if line.startswith("usage:"):
            opts |= set(OPT.findall(line))
        elif re.match(r"^\s+-", line):
            head = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            opts |= set(OPT.findall(head))
            keys |= set(re.findall(r"-o (\w+)=", head))
    return opts, keys


def helper_options(text):
    """The options `mount.sluice --help` lists (its indented option lines)."""
    opts = set()
    for line in text.splitlines():
        if re.match(r"^\s+-", line):
            head = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            opts |= set(OPT.findall(head))
    return opts


def exit_codes(text):
    m = re.search(r"Exit codes:(.*?)(?:\.\s*$|\Z)", text, re.S | re.M)
    return set(re.findall(r"(?<![\w-])(\d) ", m.group(1))) if m else set()


# scdoc parsing

def plain(s):
    """scdoc markup away: escapes kept as the character, * and _ dropped."""
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            out.append(s[i + 1])
            i += 2
            continue
        if c not in "*":
            out.append(c)
        i += 1
    return re.sub(r"(?<![\w])_|_(?![\w])", "", "".join(out))


def sections(scd):
    """{heading: [lines]} for '# ' and '## ' headings (a '## ' one also
    lands in its parent's lines)."""
    secs, cur, sub = {}, None, None
    fenced = False
    for line in scd.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("# "):
            cur, sub = line[2:].strip(), None
            secs[cur] = []
            continue
        if not fenced and line.startswith("## "):
            sub = line[3:].strip()
            secs[sub] = []
        if cur is not None:
            secs[cur].append(line)
        if sub is not None and not line.startswith("## "):
            secs[sub].append(line)
    return secs


def defined_options(lines):
    """Options in the heads of definition lists: lines at the section's own
    level (no indent) starting with an option."""
    opts = set()
    for line in lines:
        if re.match(r"^\*-", line):
            opts |= set(OPT.findall(plain(line)))
    return opts


def main():
    root, exe = sys.argv[1], sys.argv[2]
    doc = os.path.join(root, "doc")
    pages = {p: os.path.join(doc, p + ".scd")
             for p in ("sluice.1", "mount.sluice.8", "sluice.json.5")}
    if not all(os.path.exists(p) for p in pages.values()):
        print("skip manpages: doc/*.scd missing")
        return 77
    with open(pages["sluice.1"], encoding="utf-8") as f:
        man1 = f.read()
    with open(pages["mount.sluice.8"], encoding="utf-8") as f:
        man8 = f.read()
    secs = sections(man1)

    rc, top = run([exe, "--help"])
    commands = help_commands(top)
    check("sluice --help lists commands", [] if rc == 0 and commands else
          [f"'sluice --help' exited {rc} or listed no command"])
    man_cmds = [h[len("sluice "):] for h in secs if h.startswith("sluice ")]
    check("commands: sluice --help == sluice.1 COMMANDS",
          [f"'{c}' in --help, not in sluice.1" for c in commands if c not in man_cmds] +
          [f"'{c}' in sluice.1, not in --help" for c in man_cmds if c not in commands])

    man_global = defined_options(secs.get("OPTIONS", []))
    check("global options of sluice --help are in sluice.1 OPTIONS",
          [f"{o} in 'sluice --help', not in sluice.1 OPTIONS"
           for o in sorted(help_global_options(top) - man_global)])

    man_codes = set()
    for line in secs.get("EXIT STATUS", []):
        m = re.match(r"^\*(\d)\*\s*$", line)
        if m:
            man_codes.add(m.group(1))
    codes = exit_codes(top)
    check("exit codes: sluice --help == sluice.1 EXIT STATUS",
          [] if codes and codes == man_codes else
          [f"--help says {sorted(codes)}, sluice.1 {sorted(man_codes)}"])

    help_opts = {}
    mount_help = ""
    for c in commands:
        rc, text = run([exe, c, "--help"])
        if c == "mount":
            mount_help = text
        if rc != 0:
            check(f"sluice {c} --help", [f"exited {rc}"])
            continue
        opts, keys = help_options(text)
        help_opts[c] = opts
        lines = secs.get("sluice " + c, [])
        man = defined_options(lines)
        check(f"sluice {c}: --help options == sluice.1 options",
              [f"{o} in --help, not in sluice.1" for o in sorted(opts - man)] +
              [f"{o} in sluice.1, not in --help" for o in sorted(man - opts)])
        body = plain("\n".join(lines))
        if keys:
            check(f"sluice {c}: -o values of --help are in sluice.1",
                  [f"-o {k}= not in sluice.1" for k in sorted(keys) if k + "=" not in body])

    # mount.sluice: the binary called by that name
    with tempfile.TemporaryDirectory() as tmp:
        link = os.path.join(tmp, "mount.sluice")
        os.symlink(os.path.abspath(exe), link)
        rc, htext = run([link, "--help"])
    hopts = helper_options(htext if rc == 0 else mount_help)
    man8_opts = set()
    for line in sections(man8).get("OPTIONS", []):
        if re.match(r"^\*-", line):
            man8_opts |= set(OPT.findall(plain(line)))
    check("mount.sluice: helper options of --help are in mount.sluice.8",
          ([] if rc == 0 else [f"'mount.sluice --help' exited {rc}"]) +
          ([] if hopts else ["no options found in 'mount.sluice --help'"]) +
          [f"{o} not in mount.sluice.8 OPTIONS" for o in sorted(hopts - man8_opts)])

    # the bash completion
    comp = os.path.join(root, "contrib", "completion", "sluice.bash")
    if not os.path.exists(comp):
        check("completion: contrib/completion/sluice.bash exists", ["missing"])
    else:
        p = subprocess.run(["bash", "-n", comp], stderr=subprocess.PIPE, text=True)
        check("completion: bash -n", [] if p.returncode == 0 else [p.stderr.strip()])

        def complete(*words):
            script = ('source "$1"; shift; COMP_WORDS=("$@"); '
                      'COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _sluice; '
                      'printf "%s\\n" "${COMPREPLY[@]}"')
            p = subprocess.run(["bash", "-c", script, "bash", comp] + list(words),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=30)
            return set(l for l in p.stdout.splitlines() if l), p.stderr.strip()

        got, err = complete("sluice", "mo")
        check("completion: 'sluice mo' offers mount",
              [] if "mount" in got and not err else [f"COMPREPLY {sorted(got)} {err}"])
        got, err = complete("sluice", "")
        check("completion: commands == sluice --help",
              [f"missing {c}" for c in commands if c not in got] +
              [f"extra {c}" for c in sorted(got - set(commands) - {"help"})] +
              ([err] if err else []))
        for c in commands:
            if c not in help_opts:
                continue
            got, err = complete("sluice", c, "-")
            want = help_opts[c] | {"--help"}
            check(f"completion: sluice {c} options == --help",
                  [f"missing {o}" for o in sorted(want - got)] +
                  [f"extra {o}" for o in sorted(got - want)] + ([err] if err else []))
        got, err = complete("sluice", "mount", "-o", "allow_other,la")
        check("completion: -o lists complete their last item",
              [] if "allow_other,land=rename" in got and not err else
              [f"COMPREPLY {sorted(got)} {err}"])

    failed = 0
    for name, problems in results:
        if problems:
            failed += 1
            print(f"FAIL manpages: {name}")
            for p in problems:
                print(f"     {p}")
        else:
            print(f"ok   manpages: {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
