//! Reading what a command does, for the simulator's inference: a direct argv (`sleep 5`,
//! `true`) or a shell script (`sh -c 'sleep 2; touch /tmp/ready; sleep 30'`) of the common
//! shapes — sleeps, exits, `true`/`false`, `touch`/`rm`/`echo … > FILE`, file tests (`test -f`,
//! `[ -f … ]`, `cat`, `ls`, `stat`) — joined by `;`, newlines, `&&` and `||`. Anything else
//! (another program, a pipe, a loop, a variable) is not read: the caller assumes instead.
//!
//! The splitter below is deliberately small: it knows quotes and the four separators, which is
//! all the shapes it reads need; `shlex` splits words but not statements.

use std::collections::BTreeMap;
use std::time::Duration;

/// How a statement is joined to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    /// `;` or a newline: always runs.
    Seq,
    /// `&&`: runs when the previous status is 0.
    And,
    /// `||`: runs when the previous status is not 0.
    Or,
}

/// One simple command: its words (quotes removed) and the files it redirects output to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Statement {
    join: Join,
    words: Vec<String>,
    writes: Vec<String>,
}

/// A file appearing (`present`) or disappearing at `at` after the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileOp {
    /// When, from the start of the command.
    pub at: Duration,
    /// The path as written.
    pub path: String,
    /// Created (true) or removed.
    pub present: bool,
}

/// What a command does, read to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reading {
    /// `Some(code)`: it exits with `code` after `took`; `None`: it runs until stopped (a
    /// `sleep infinity`, `tail -f /dev/null`) from `took` on.
    pub exit: Option<i32>,
    /// Time spent before the exit (or before running on forever).
    pub took: Duration,
    /// Files it creates and removes, in time order.
    pub files: Vec<FileOp>,
}

/// Why a command is not read (shown after `assumed:`).
pub(crate) type Unread = String;

/// The shells whose `-c` script is read.
const SHELLS: [&str; 4] = ["sh", "bash", "ash", "dash"];

fn base(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Reads `argv` (a container's `command` + `args`, or an exec probe's or hook's command).
/// `files` answers a file test for a path the command has not itself created or removed
/// (`None`: not known, and the command is not read).
pub(crate) fn read(
    argv: &[String],
    files: &dyn Fn(&str) -> Option<bool>,
) -> Result<Reading, Unread> {
    let (program, rest) = argv
        .split_first()
        .ok_or_else(|| "no command: the image's entrypoint is not read".to_string())?;
    if SHELLS.contains(&base(program)) {
        let (flags, script) = match rest {
            [flag, script, ..] if flag.starts_with('-') && flag.ends_with('c') => (flag, script),
            _ => return Err(format!("{program} without -c SCRIPT")),
        };
        let errexit = flags.contains('e');
        return run(&split(script)?, errexit, files);
    }
    let statement = Statement {
        join: Join::Seq,
        words: argv.to_vec(),
        writes: Vec::new(),
    };
    run(&[statement], false, files)
}

/// Splits a script into statements (quotes removed; `>`/`>>` redirections collected).
fn split(script: &str) -> Result<Vec<Statement>, Unread> {
    let mut out = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut join = Join::Seq;
    let mut chars = script.chars().peekable();
    let finish_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("an unclosed quote".to_string()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('$' | '`') => return Err("a variable or substitution".to_string()),
                        Some('\\') => word.extend(chars.next()),
                        Some(c) => word.push(c),
                        None => return Err("an unclosed quote".to_string()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            '$' | '`' | '(' | ')' | '{' | '}' | '<' | '*' | '?' => {
                return Err(format!("shell syntax {c:?} (variables, subshells, globs)"));
            }
            '#' if !in_word => {
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
            }
            // `2>&1`, `>&2`: a redirection, not a background job.
            '&' if in_word && word.ends_with('>') => word.push(c),
            ' ' | '\t' => finish_word(&mut word, &mut in_word, &mut words),
            ';' | '\n' | '&' | '|' => {
                finish_word(&mut word, &mut in_word, &mut words);
                let next = match c {
                    '&' if chars.peek() == Some(&'&') => Join::And,
                    '|' if chars.peek() == Some(&'|') => Join::Or,
                    '&' => return Err("a background job (&)".to_string()),
                    '|' => return Err("a pipe".to_string()),
                    _ => Join::Seq,
                };
                if next != Join::Seq {
                    chars.next();
                }
                if !words.is_empty() {
                    out.push(statement(join, std::mem::take(&mut words))?);
                } else if next != Join::Seq {
                    return Err(format!("a {c}{c} with nothing before it"));
                }
                join = next;
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    finish_word(&mut word, &mut in_word, &mut words);
    if !words.is_empty() {
        out.push(statement(join, words)?);
    }
    Ok(out)
}

/// A statement from its words: redirections taken out (`> FILE` and `>> FILE` write the file;
/// `2>&1`, `>&2` and `> /dev/null` change nothing the simulator sees).
fn statement(join: Join, words: Vec<String>) -> Result<Statement, Unread> {
    let mut kept = Vec::new();
    let mut writes = Vec::new();
    let mut iter = words.into_iter();
    while let Some(w) = iter.next() {
        let target = w
            .trim_start_matches(['1', '2'])
            .strip_prefix('>')
            .map(|t| t.trim_start_matches('>'));
        match target {
            None => kept.push(w),
            Some(t) if t.starts_with('&') => {}
            Some("") => {
                let path = iter
                    .next()
                    .ok_or_else(|| "a redirection without a file".to_string())?;
                writes.push(path);
            }
            Some(path) => writes.push(path.to_string()),
        }
    }
    writes.retain(|p| p != "/dev/null");
    Ok(Statement {
        join,
        words: kept,
        writes,
    })
}

/// The state of a run through statements.
struct State<'a> {
    now: Duration,
    status: i32,
    own: BTreeMap<String, bool>,
    files: Vec<FileOp>,
    outside: &'a dyn Fn(&str) -> Option<bool>,
}

impl State<'_> {
    fn set(&mut self, path: &str, present: bool) {
        self.own.insert(path.to_string(), present);
        self.files.push(FileOp {
            at: self.now,
            path: path.to_string(),
            present,
        });
    }

    fn exists(&self, path: &str) -> Result<bool, Unread> {
        if let Some(p) = self.own.get(path) {
            return Ok(*p);
        }
        (self.outside)(path).ok_or_else(|| format!("whether {path} exists is not known"))
    }

    fn reading(self, exit: Option<i32>) -> Reading {
        Reading {
            exit,
            took: self.now,
            files: self.files,
        }
    }
}

/// What one statement did.
enum Step {
    /// Its status.
    Status(i32),
    /// The command ends here with this code.
    Exit(i32),
    /// The command runs on until stopped.
    Forever,
}

fn run(
    statements: &[Statement],
    errexit: bool,
    outside: &dyn Fn(&str) -> Option<bool>,
) -> Result<Reading, Unread> {
    let mut st = State {
        now: Duration::ZERO,
        status: 0,
        own: BTreeMap::new(),
        files: Vec::new(),
        outside,
    };
    let mut errexit = errexit;
    for s in statements {
        let skip = match s.join {
            Join::Seq => false,
            Join::And => st.status != 0,
            Join::Or => st.status == 0,
        };
        if skip {
            continue;
        }
        if s.words.first().map(String::as_str) == Some("set") {
            if s.words
                .iter()
                .skip(1)
                .any(|w| w.starts_with('-') && w.contains('e'))
            {
                errexit = true;
            }
            st.status = 0;
            continue;
        }
        for path in &s.writes {
            st.set(path, true);
        }
        match one(&s.words, &mut st)? {
            Step::Status(code) => st.status = code,
            Step::Exit(code) => return Ok(st.reading(Some(code))),
            Step::Forever => return Ok(st.reading(None)),
        }
        // `set -e`: a failing command ends the script (not one on the left of && or ||).
        let tested = statements
            .iter()
            .skip_while(|n| !std::ptr::eq(*n, s))
            .nth(1)
            .is_some_and(|n| n.join != Join::Seq);
        if errexit && st.status != 0 && !tested {
            let code = st.status;
            return Ok(st.reading(Some(code)));
        }
    }
    let code = st.status;
    Ok(st.reading(Some(code)))
}

/// What one simple command does.
fn one(words: &[String], st: &mut State<'_>) -> Result<Step, Unread> {
    let Some((program, args)) = words.split_first() else {
        return Ok(Step::Status(0));
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let name = base(program);
    Ok(match name {
        "exec" => return one(&words[1..], st).map(as_exit),
        "sleep" => match args.as_slice() {
            ["infinity" | "inf"] => Step::Forever,
            [] => return Err("sleep without a duration".to_string()),
            _ => {
                let d: Option<Duration> =
                    args.iter().map(|a| podvisor_api::lint::sleep_arg(a)).sum();
                st.now += d.ok_or_else(|| format!("sleep {}: not a duration", args.join(" ")))?;
                Step::Status(0)
            }
        },
        "exit" => Step::Exit(match args.first() {
            None => st.status,
            Some(n) => n
                .parse::<i32>()
                .map(|n| n & 0xff)
                .map_err(|_| format!("exit {n}: not a number"))?,
        }),
        "true" | ":" => Step::Status(0),
        "false" => Step::Status(1),
        "echo" | "printf" | "date" | "hostname" | "id" | "pwd" | "whoami" | "uname" => {
            Step::Status(0)
        }
        "touch" => {
            for path in operands(&args) {
                st.set(path, true);
            }
            Step::Status(0)
        }
        "rm" => {
            for path in operands(&args) {
                st.set(path, false);
            }
            Step::Status(0)
        }
        "tail" if matches!(args.as_slice(), ["-f", "/dev/null"]) => Step::Forever,
        "test" | "[" => {
            let mut args = args.clone();
            if name == "[" && args.pop() != Some("]") {
                return Err("[ without ]".to_string());
            }
            let (negate, rest) = match args.as_slice() {
                ["!", rest @ ..] => (true, rest),
                rest => (false, rest),
            };
            let exists = match rest {
                ["-f" | "-e" | "-s" | "-r", path] => st.exists(path)?,
                _ => {
                    return Err(format!(
                        "{name} {}: only file tests are read",
                        args.join(" ")
                    ));
                }
            };
            Step::Status(i32::from(exists == negate))
        }
        "cat" | "ls" | "stat" => {
            let paths = operands(&args);
            if paths.is_empty() {
                return Err(format!("{name} without a file"));
            }
            let mut all = true;
            for p in paths {
                all &= st.exists(p)?;
            }
            Step::Status(if all { 0 } else { 1 })
        }
        _ => return Err(format!("{program}: unknown command")),
    })
}

/// `exec CMD`: the command's end is the script's.
fn as_exit(step: Step) -> Step {
    match step {
        Step::Status(code) => Step::Exit(code),
        other => other,
    }
}

/// A command's operands (its options dropped).
fn operands<'a>(args: &[&'a str]) -> Vec<&'a str> {
    args.iter()
        .copied()
        .filter(|a| !a.starts_with('-'))
        .collect()
}

/// A command as one line for notes: a shell's script alone, else the words joined.
pub(crate) fn shown(argv: &[String]) -> String {
    match argv {
        [program, flag, script, ..] if SHELLS.contains(&base(program)) && flag.starts_with('-') => {
            script.trim().replace('\n', "; ")
        }
        _ => argv.join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_string()).collect()
    }

    fn none(_: &str) -> Option<bool> {
        None
    }

    fn sh(script: &str) -> Result<Reading, Unread> {
        read(&words(&["sh", "-c", script]), &none)
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_direct_sleep_runs_its_time_and_exits_0() {
        let r = read(&words(&["sleep", "5"]), &none).unwrap();
        assert_eq!((r.exit, r.took), (Some(0), secs(5)));
        let r = read(&words(&["/bin/sleep", "1m"]), &none).unwrap();
        assert_eq!((r.exit, r.took), (Some(0), secs(60)));
    }

    #[test]
    fn true_and_false_exit_at_once() {
        assert_eq!(read(&words(&["true"]), &none).unwrap().exit, Some(0));
        assert_eq!(read(&words(&["false"]), &none).unwrap().exit, Some(1));
    }

    #[test]
    fn sequences_add_their_sleeps_and_end_with_the_exit() {
        let r = sh("sleep 2; exit 1").unwrap();
        assert_eq!((r.exit, r.took), (Some(1), secs(2)));
        let r = sh("echo starting; sleep 3").unwrap();
        assert_eq!((r.exit, r.took), (Some(0), secs(3)));
        let r = read(&words(&["/bin/sh", "-c", "sleep 1 && false"]), &none).unwrap();
        assert_eq!((r.exit, r.took), (Some(1), secs(1)));
        let r = sh("sleep 1\nexit 3\nsleep 50").unwrap();
        assert_eq!((r.exit, r.took), (Some(3), secs(1)));
        let r = sh("false || exit 4; sleep 9").unwrap();
        assert_eq!((r.exit, r.took), (Some(4), Duration::ZERO));
        let r = sh("true && sleep 2 || exit 5").unwrap();
        assert_eq!((r.exit, r.took), (Some(0), secs(2)));
    }

    #[test]
    fn set_e_ends_at_the_first_failure() {
        let r = read(&words(&["sh", "-ec", "sleep 1; false; sleep 9"]), &none).unwrap();
        assert_eq!((r.exit, r.took), (Some(1), secs(1)));
        let r = sh("set -e; false || true; sleep 2").unwrap();
        assert_eq!((r.exit, r.took), (Some(0), secs(2)));
    }

    #[test]
    fn sleep_infinity_and_tail_run_until_stopped() {
        let r = sh("echo up; sleep infinity").unwrap();
        assert_eq!(r.exit, None);
        let r = read(&words(&["tail", "-f", "/dev/null"]), &none).unwrap();
        assert_eq!(r.exit, None);
        let r = sh("sleep 2; exec sleep infinity").unwrap();
        assert_eq!((r.exit, r.took), (None, secs(2)));
    }

    #[test]
    fn files_appear_and_disappear_at_their_times() {
        let r = sh("sleep 2; touch /tmp/ready; sleep 30; rm -f /tmp/ready; echo bye > '/tmp/done'")
            .unwrap();
        let ops: Vec<(u64, &str, bool)> = r
            .files
            .iter()
            .map(|f| (f.at.as_secs(), f.path.as_str(), f.present))
            .collect();
        assert_eq!(
            ops,
            [
                (2, "/tmp/ready", true),
                (32, "/tmp/ready", false),
                (32, "/tmp/done", true)
            ]
        );
        assert_eq!((r.exit, r.took), (Some(0), secs(32)));
        let r = sh("echo up 2>&1; echo err >&2; echo x > /dev/null; exit 2").unwrap();
        assert_eq!((r.exit, r.files.len()), (Some(2), 0));
    }

    #[test]
    fn file_tests_read_own_files_and_ask_about_others() {
        let present = |p: &str| (p == "/tmp/ready").then_some(true);
        for probe in [
            vec!["cat", "/tmp/ready"],
            vec!["test", "-f", "/tmp/ready"],
            vec!["ls", "/tmp/ready"],
            vec!["sh", "-c", "[ -e /tmp/ready ]"],
        ] {
            assert_eq!(
                read(&words(&probe), &present).unwrap().exit,
                Some(0),
                "{probe:?}"
            );
        }
        let absent = |_: &str| Some(false);
        assert_eq!(
            read(&words(&["cat", "/tmp/x"]), &absent).unwrap().exit,
            Some(1)
        );
        assert_eq!(
            read(&words(&["test", "!", "-f", "/tmp/x"]), &absent)
                .unwrap()
                .exit,
            Some(0)
        );
        let err = read(&words(&["cat", "/tmp/x"]), &none).unwrap_err();
        assert!(err.contains("/tmp/x"), "{err}");
        // A file the command made itself needs no outside answer.
        assert_eq!(sh("touch /x; test -f /x").unwrap().exit, Some(0));
    }

    #[test]
    fn unknown_shapes_are_not_read_and_say_why() {
        let cases = [
            (vec!["nginx", "-g", "daemon off;"], "nginx: unknown command"),
            (
                vec!["sh", "-c", "while true; do sleep 1; done"],
                "while: unknown",
            ),
            (vec!["sh", "-c", "sleep $DELAY"], "variables"),
            (vec!["sh", "-c", "ps | grep x"], "a pipe"),
            (vec!["sh", "-c", "server &"], "background"),
            (vec!["sh", "script.sh"], "without -c"),
            (vec!["sleep", "soon"], "not a duration"),
            (vec![], "entrypoint"),
        ];
        for (argv, why) in cases {
            let err = read(&words(&argv), &none).unwrap_err();
            assert!(err.contains(why), "{argv:?}: {err}");
        }
    }

    #[test]
    fn shown_is_the_script_of_a_shell() {
        assert_eq!(
            shown(&words(&["sh", "-c", "sleep 3; exit 1"])),
            "sleep 3; exit 1"
        );
        assert_eq!(shown(&words(&["sleep", "3"])), "sleep 3");
    }
}
