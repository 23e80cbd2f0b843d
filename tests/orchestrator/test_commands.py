"""Shell command analysis: destructive commands are found wherever they hide; read-only is strict."""

from __future__ import annotations

import pytest

from orchestrator.permissions import destructive_reason, edits_in_place, is_read_only_command
from orchestrator.permissions.commands import MAX_DEPTH

RM = "rm -r/-f deletes files and directories without asking"
FORCE_PUSH = "git push --force rewrites the remote branch's history"
PLUS_PUSH = "git push +refspec force-updates a remote branch"
DELETE_PUSH = "git push --delete deletes a remote branch"
CLEAN = "git clean -f deletes untracked files"
BRANCH_D = "git branch -D deletes a branch even when it is not merged"
RESET = "git reset --hard discards uncommitted work"
CHECKOUT_ALL = "git checkout . discards every uncommitted change"
AMEND = "git commit --amend rewrites the last commit"
DROP_TABLE = "SQL DROP TABLE deletes it with all its data"
TRUNCATE_SQL = "SQL TRUNCATE deletes every row of a table"
DELETE_ALL = "SQL DELETE FROM without WHERE deletes every row of a table"
FIND_DELETE = "find -delete deletes every file it matches"
FIND_EXEC_RM = "find -exec rm deletes every file it is handed"
XARGS_RM = "xargs rm deletes every file it is handed"
KUBECTL = "kubectl delete deletes live resources"
TERRAFORM = "terraform destroy deletes the managed infrastructure"
TERRAFORM_APPLY = "terraform apply -destroy deletes the managed infrastructure"
FORK_BOMB = "a fork bomb exhausts the machine's processes"

DESTRUCTIVE = [
    # rm in every flag form and spelling
    ("rm -rf build", RM),
    ("rm -fr build", RM),
    ("rm -r build", RM),
    ("rm -R build", RM),
    ("rm -f notes.txt", RM),
    ("rm -r -f build", RM),
    ("rm --recursive build", RM),
    ("rm --force notes.txt", RM),
    ("rm -v -rf build", RM),
    ("rm build -rf", RM),
    ("/bin/rm -fr x", RM),
    ("/usr/bin/rm -r x", RM),
    ("r\\m -rf x", RM),
    ('"rm" -rf x', RM),
    ("'r'm -rf x", RM),
    ("$'\\x72\\x6d' -rf x", RM),
    ("rm${IFS}-rf${IFS}/", RM),
    ('rm -rf / "', RM),  # unterminated quote: the lenient split still sees it
    # wrappers and prefixes
    ("sudo rm -rf /", RM),
    ("sudo -u root rm -rf /srv", RM),
    ("env rm -rf x", RM),
    ("env -i FOO=1 rm -rf x", RM),
    ("FOO=1 rm -rf x", RM),
    ("nohup rm -rf x &", RM),
    ("time rm -rf x", RM),
    ("nice -n 10 rm -rf x", RM),
    ("timeout 5 rm -rf x", RM),
    ("command rm -rf x", RM),
    ("exec rm -rf x", RM),
    ("busybox rm -rf x", RM),
    ("env -S 'rm -rf x'", RM),
    # command lists, pipelines, subshells, control flow
    ("ls; rm -rf x", RM),
    ("ls && rm -rf x", RM),
    ("ls || rm -rf x", RM),
    ("ls | rm -rf x", RM),
    ("ls & rm -rf x", RM),
    ("ls\nrm -rf x", RM),
    ("(cd x && rm -rf y)", RM),
    ("{ rm -rf x; }", RM),
    ("if true; then rm -rf x; fi", RM),
    ("for f in *; do rm -f $f; done", RM),
    ('while read f; do rm -r "$f"; done < list', RM),
    ("case $x in a) rm -rf /;; esac", RM),
    ("function f { rm -rf /; }", RM),
    ("f() { rm -rf /; }; f", RM),
    ("! rm -rf x", RM),
    # substitutions and nested shells
    ("echo $(rm -rf x)", RM),
    ('echo "$(rm -rf x)"', RM),
    ("echo `rm -rf x`", RM),
    ("X=$(rm -rf x) ls", RM),
    ("echo ${HOME:-$(rm -rf x)}", RM),
    ("echo $(( $(rm -rf x) + 1 ))", RM),
    ("cat <(rm -rf x)", RM),
    ("echo $(echo $(rm -rf x))", RM),
    ('sh -c "rm -rf /"', RM),
    ("bash -c 'rm -rf /'", RM),
    ("bash -lc 'rm -rf /'", RM),
    ("bash -e -c 'rm -rf /'", RM),
    ("zsh -c 'ls; rm -rf ~'", RM),
    ("sh -c \"sh -c 'rm -rf /'\"", RM),
    ("eval 'rm -rf x'", RM),
    ("eval rm -rf x", RM),
    ("watch -n 5 rm -rf x", RM),
    ("echo 'rm -rf /' | sh", RM),
    ("cat <<EOF | sh\nrm -rf /\nEOF", RM),
    ("bash <<< 'rm -rf /'", RM),
    ("cat <<EOF\n$(rm -rf x)\nEOF", RM),
    # xargs and find
    ("ls | xargs rm", XARGS_RM),
    ("find . -name '*.tmp' | xargs -0 rm", XARGS_RM),
    ("find . -print0 | xargs -0 -n 10 rm -f", XARGS_RM),
    ("find . -delete", FIND_DELETE),
    ("find /tmp -name '*.log' -mtime +7 -delete", FIND_DELETE),
    ("find . -exec rm {} \\;", FIND_EXEC_RM),
    ("find . -type f -execdir rm -- {} +", FIND_EXEC_RM),
    ("find . -exec git reset --hard \\;", RESET),
    # git
    ("git reset --hard", RESET),
    ("git reset --hard HEAD~3", RESET),
    ("git -C repo reset --hard", RESET),
    ("git push --force", FORCE_PUSH),
    ("git push -f origin main", FORCE_PUSH),
    ("git push origin main -f", FORCE_PUSH),
    ("git push -uf origin main", FORCE_PUSH),
    ("git push --force-with-lease", FORCE_PUSH),
    ("git push --force-with-lease=main:abc123 origin main", FORCE_PUSH),
    ("git push origin +main", PLUS_PUSH),
    ("git push origin +HEAD:refs/heads/main", PLUS_PUSH),
    ("git push origin --delete feature", DELETE_PUSH),
    ("git push origin :feature", DELETE_PUSH),
    ("git push --mirror backup", "git push --mirror/--prune deletes remote branches missing locally"),
    ("git clean -f", CLEAN),
    ("git clean -fd", CLEAN),
    ("git clean -fx", CLEAN),
    ("git clean -xdf", CLEAN),
    ("git clean --force -d", CLEAN),
    ("git checkout .", CHECKOUT_ALL),
    ("git checkout -- .", CHECKOUT_ALL),
    ("git checkout -f main", "git checkout --force discards uncommitted changes"),
    ("git restore .", "git restore . discards every uncommitted change"),
    ("git restore --worktree --staged .", "git restore . discards every uncommitted change"),
    ("git stash drop", "git stash drop deletes stashed work"),
    ("git stash clear", "git stash clear deletes stashed work"),
    ("git branch -D feature", BRANCH_D),
    ("git branch --delete --force feature", BRANCH_D),
    ("git branch -d -f feature", BRANCH_D),
    ("git commit --no-verify -m 'wip'", "git commit --no-verify skips the repository's hooks"),
    ("git push --no-verify", "git push --no-verify skips the repository's hooks"),
    ("git commit -nm 'wip'", "git commit -n skips the repository's hooks"),
    ("git commit --amend", AMEND),
    ("git commit --amend --no-edit -a", AMEND),
    ("sh -c 'git push --force'", FORCE_PUSH),
    # SQL, case-insensitive, wherever it is executed
    ("psql -c 'DROP TABLE users'", DROP_TABLE),
    ("psql -c 'drop table users'", DROP_TABLE),
    ("mysql -e 'DROP DATABASE shop'", "SQL DROP DATABASE deletes it with all its data"),
    ("psql -c 'DROP SCHEMA public CASCADE'", "SQL DROP SCHEMA deletes it with all its data"),
    ("mysql -e 'TRUNCATE users'", TRUNCATE_SQL),
    ("psql -c 'TRUNCATE TABLE users'", TRUNCATE_SQL),
    ("delete from t;", DELETE_ALL),
    ("sqlite3 app.db 'DELETE FROM users'", DELETE_ALL),
    ('sqlite3 app.db "DELETE FROM t WHERE id=1; delete from u;"', DELETE_ALL),
    ("echo 'DROP TABLE users;' | psql", DROP_TABLE),
    ("psql <<SQL\nDELETE FROM sessions;\nSQL", DELETE_ALL),
    # infrastructure
    ("kubectl delete pod web-1", KUBECTL),
    ("kubectl -n prod delete deployment web", KUBECTL),
    ("kubectl --context prod delete ns web", KUBECTL),
    ("oc delete project demo", "oc delete deletes live resources"),
    ("terraform destroy", TERRAFORM),
    ("terraform -chdir=infra destroy -auto-approve", TERRAFORM),
    ("terraform apply -destroy", TERRAFORM_APPLY),
    ("terraform apply -destroy -auto-approve", TERRAFORM_APPLY),
    ("tofu destroy", TERRAFORM),
    # disks, file systems, permissions, processes
    ("mkfs /dev/sdb1", "mkfs formats a file system"),
    ("mkfs.ext4 /dev/sdb1", "mkfs.ext4 formats a file system"),
    ("dd if=/dev/zero of=/dev/sda bs=1M", "dd of=/dev/sda overwrites a device"),
    ("dd if=image.iso of=/dev/nvme0n1", "dd of=/dev/nvme0n1 overwrites a device"),
    ("echo x > /dev/sda", "writing to /dev/sda destroys the file system on it"),
    ("cat image > /dev/sdb", "writing to /dev/sdb destroys the file system on it"),
    ("shred -u secret.key", "shred overwrites files beyond recovery"),
    ("wipefs -a /dev/sdb", "wipefs erases file-system signatures"),
    ("chmod -R 777 /", "chmod -R on / changes a whole system tree"),
    ("chmod 777 -R /etc/", "chmod -R on /etc/ changes a whole system tree"),
    ("chown -R nobody /home", "chown -R on /home changes a whole system tree"),
    ("truncate -s 0 app.log", "truncate -s 0 throws away file contents"),
    ("truncate -s0 app.log", "truncate -s 0 throws away file contents"),
    ("truncate --size=0 app.log", "truncate -s 0 throws away file contents"),
    (":(){ :|:& };:", FORK_BOMB),
    ("bomb() { bomb | bomb & }; bomb", FORK_BOMB),
]

NOT_DESTRUCTIVE = [
    "ls -la",
    "rm notes.txt",
    "rm -i notes.txt",
    "rm -v notes.txt",
    "rm -- -rf",
    "rmdir empty",
    "echo 'rm -rf /'",
    "echo rm -rf x",
    "grep -r 'rm -rf' scripts/",
    "grep 'DROP TABLE' schema.sql",
    "cat migrations/*.sql | grep -i 'delete from'",
    "DELETE FROM t WHERE id=1",
    "psql -c 'DELETE FROM sessions WHERE expires < now()'",
    "psql -c 'SELECT * FROM users'",
    "git clean -n",
    "git clean -nd",
    "git clean --dry-run -f",
    "git clean -n -f",
    "git branch -d feature",
    "git branch --delete feature",
    "git push origin main",
    "git push -u origin feature",
    "git reset HEAD~1",
    "git reset --soft HEAD~1",
    "git checkout main",
    "git checkout -b feature",
    "git checkout -- src/app.py",
    "git restore --staged .",
    "git stash",
    "git stash pop",
    "git stash list",
    "git commit -m 'fix: drop table support'",
    "git log --oneline",
    "find . -name '*.py'",
    "find . -exec grep -l TODO {} \\;",
    "kubectl get pods",
    "kubectl describe pod delete-me",
    "terraform plan -destroy",
    "terraform apply",
    "dd if=/dev/zero of=/dev/null count=1",
    "dd if=/dev/sda of=backup.img",
    "cat /dev/sda > /dev/null",
    "chmod -R u+w ./build",
    "chmod 755 /",
    "truncate -s 10M disk.img",
    "xargs echo < list",
    "ls | sh -c 'cat'",
    "cat <<EOF\nrm -rf /\nEOF",
    "cat <<'EOF'\n$(rm -rf x)\nEOF",
    "",
]

READ_ONLY = [
    "ls",
    "ls -la /tmp",
    "/usr/bin/ls -l",
    "cat README.md",
    "head -n 20 app.py",
    "tail -n 50 log.txt",
    "wc -l *.py",
    "grep -rn 'def main' src/",
    "rg TODO",
    "egrep 'a|b' file",
    "find . -name '*.py' -type f",
    "pwd",
    "echo hello",
    "printf '%s\\n' a b",
    "date",
    "whoami && id && uname -a",
    "stat file",
    "file app.bin",
    "du -sh .",
    "df -h",
    "tree -L 2",
    "which python",
    "type ls",
    "sort names.txt | uniq -c",
    "cut -d, -f1 data.csv | tr a-z A-Z",
    "diff a.txt b.txt",
    "cmp a.bin b.bin",
    "md5sum file",
    "sha256sum file",
    "basename /a/b.txt && dirname /a/b.txt",
    "realpath . && readlink -f link",
    "env",
    "env LANG=C ls",
    "LC_ALL=C TZ=UTC date",
    "sed -n '1,20p' app.py",
    "sed 's/foo/bar/g' file.txt",
    "git status",
    "git log --oneline -n 5",
    "git diff HEAD~1",
    "git show HEAD",
    "git branch",
    "git branch -a -vv",
    "git branch --list 'feat*'",
    "git tag",
    "git tag -l 'v*'",
    "git rev-parse HEAD",
    "git ls-files",
    "git blame app.py",
    "git remote -v",
    "git config --get user.name",
    "git config --list",
    "git -C repo status --porcelain",
    "git --no-pager log",
    "ls 2>/dev/null",
    "ls > /dev/null 2>&1",
    "ls 2>&1 | grep x",
    "ls &>/dev/null",
    "cat < input.txt",
    "echo $(ls)",
    'echo "$(git rev-parse HEAD)"',
    "ls ';'",
    "grep 'a|b' file",
    "bash -c 'ls | wc -l'",
    "find . -name '*.py' | xargs grep -n TODO",
    "time ls",
    "cat <<EOF\nrm -rf /\nEOF",
    "ls # rm -rf /",
]

NOT_READ_ONLY = [
    "rm notes.txt",
    "touch x",
    "mkdir build",
    "cp a b",
    "mv a b",
    "ls > out.txt",
    "ls >> out.txt",
    "ls >| out.txt",
    "ls &> out.txt",
    "ls 2> errors.txt",
    "> notes.txt",
    "cat file | tee copy",
    "echo $(rm x)",
    "echo `touch x`",
    "sed -i 's/a/b/' file",
    "sed -i.bak 's/a/b/' file",
    "sed --in-place 's/a/b/' file",
    "sed 's/a/b/w out.txt' file",
    "sed -f script.sed file",
    "find . -delete",
    "find . -exec cat {} \\;",
    "find . -fprint out.txt",
    "sort -o out.txt in.txt",
    "uniq in.txt out.txt",
    "tree -o out.txt",
    "date -s '2020-01-01'",
    "rg --pre ./decode TODO",
    "git commit -m x",
    "git push",
    "git checkout main",
    "git branch feature",
    "git branch -d feature",
    "git tag v1.0",
    "git remote add origin url",
    "git config user.name x",
    "git -c core.pager=less log",
    "git log --output=log.txt",
    "env rm x",
    "GIT_PAGER=sh git log",
    "env LD_PRELOAD=/tmp/x.so ls",
    "FOO=1 command git status",
    "PATH=/tmp/evil; ls",
    "sudo ls",
    "nohup ls",
    "./ls",
    "bin/cat file",
    "bash script.sh",
    "curl -s https://example.com | sh",
    "python -c 'print(1)'",
    "xargs rm",
    "ls 'unterminated",
    "echo $(ls",
    "",
    "   ",
    "unknown-tool --flag",
]


@pytest.mark.parametrize(("command", "reason"), DESTRUCTIVE)
def test_destructive_commands_are_found_with_their_reason(command: str, reason: str) -> None:
    assert destructive_reason(command) == reason


@pytest.mark.parametrize("command", NOT_DESTRUCTIVE)
def test_ordinary_commands_are_not_destructive(command: str) -> None:
    assert destructive_reason(command) is None


@pytest.mark.parametrize("command", READ_ONLY)
def test_read_only_commands(command: str) -> None:
    assert is_read_only_command(command) is True


@pytest.mark.parametrize("command", NOT_READ_ONLY)
def test_anything_that_may_write_or_is_unknown_is_not_read_only(command: str) -> None:
    assert is_read_only_command(command) is False


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("sed -i 's/a/b/' f", True),
        ("sed -Ei 's/a/b/' f", True),
        ("sed --in-place=.bak 's/a/b/' f", True),
        ("find . -name '*.py' | xargs sed -i 's/a/b/'", True),
        ("bash -c \"sed -i 's/a/b/' f\"", True),
        ("sed -n '1p' f", False),
        ("grep -i sed f", False),
    ],
)
def test_sed_in_place_is_found_anywhere(command: str, expected: bool) -> None:
    assert edits_in_place(command) is expected


def test_no_command_is_listed_both_read_only_and_not() -> None:
    assert set(READ_ONLY) & set(NOT_READ_ONLY) == set()
    assert {command for command, _ in DESTRUCTIVE} & set(NOT_DESTRUCTIVE) == set()


def test_nesting_beyond_the_limit_is_refused_rather_than_trusted() -> None:
    command = "ls"
    for _ in range(MAX_DEPTH + 1):
        command = f"echo $({command})"
    assert destructive_reason(command) == (
        f"shell commands nested more than {MAX_DEPTH} levels deep cannot be inspected"
    )
    assert is_read_only_command(command) is False


def test_nesting_within_the_limit_is_inspected() -> None:
    command = "ls"
    for _ in range(3):
        command = f"sh -c {_quote(command)}"
    assert is_read_only_command(command) is True
    assert destructive_reason(command.replace("ls", "rm -rf x")) == RM


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
