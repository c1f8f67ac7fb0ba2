/* idrrun-guard: the supervisor between idrrun and a student's program.
 *
 * Outer mode (every run and compile, started by idrrun):
 *   idrrun-guard --status-fd=N --parent=PID --file-size=B --nproc=N --address-space=B
 *                --cgroups=F1:F2 --uid=U --gid=G --sweep=0|1 --stack=B --cpus=C1:C2
 *                -- PROGRAM [ARGS...]
 * Inner mode (inside the sandbox, between bubblewrap and the program):
 *   idrrun-guard --inner-status-fd=N -- PROGRAM [ARGS...]
 * The options are those of the records GuardArgs and InnerGuardArgs in guard.py (a test checks
 * that the two sides agree):
 *   status-fd      pipe to idrrun: the guard writes "child PID", then "exit N" or "signal N";
 *                  the program never inherits it, so it cannot forge its own status
 *   parent         pid of idrrun (the kernel); when it dies, the guard kills the whole run
 *   file-size, nproc, address-space  resource limits in bytes/tasks (0: none) for the program
 *   cgroups        ':'-separated cgroup.procs files to join before starting the program ("": none)
 *   uid, gid       the unprivileged identity the program runs as (-1: keep ours); only root
 *                  can give one, and then RLIMIT_NPROC counts that identity's processes alone;
 *                  that identity is the run's own (a fresh uid per box), so when the program
 *                  ends every process of that uid is killed (kill(-1) as it, as isolate does)
 *   sweep          1: after the program, kill what carries its IDRRUN_RUN marker (when there is
 *                  no cgroup to list the run's processes, and no PID namespace to end them)
 *   stack          RLIMIT_STACK in bytes for the program (-1: unlimited, 0: as inherited), at
 *                  most the hard limit: course programs keep big arrays on the stack
 *   cpus           ':'-separated CPUs the program may run on ("": as inherited): a timed run
 *                  has CPUs of its own, and every other graded process keeps off them
 *   inner-status-fd  "inner launched" just before the program is executed (the box was made),
 *                  then the same protocol ("inner exit N" / "inner signal N") from inside the
 *                  sandbox, where the outer guard only sees bubblewrap's own status (128+N for
 *                  a signal, like `exit 128+N`); the inner guard makes itself undumpable so
 *                  that the program, same user as it, cannot reach its descriptor
 *
 * Why a separate process: a Jupyter kernel can be killed (restart, crash) while a program runs.
 * Nothing in the kernel runs then, but the guard is told (PR_SET_PDEATHSIG) and removes every
 * process of the run, also those that left the process group with setsid(): as a child
 * subreaper it inherits them when their parent dies, and kills them; where the kernel cannot
 * list a process's children, the run's cgroups, else the IDRRUN_RUN marker every process of
 * the run carries in its environment, find them.
 * Written in C so that it costs a millisecond per run, not an interpreter's start-up.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t child_pid = 0;
static pid_t parent_pid = 0;
static int status_fd = -1;

static void on_signal(int sig)
{
    if (child_pid <= 0)
        return;
    /* Our parent died (PR_SET_PDEATHSIG): nobody will escalate, so kill outright. */
    if (parent_pid > 0 && getppid() != parent_pid)
        sig = SIGKILL;
    kill(-child_pid, sig);
    if (sig == SIGKILL || sig == SIGTERM)
        kill(-child_pid, SIGCONT); /* a stopped program must see its SIGTERM */
}

/* As a child subreaper the guard inherits every orphaned descendant of the program, also those
 * that left with setsid() and a double fork: kill its children, reap them, and again, until it
 * has none. Returns 0 when done, -1 when the kernel cannot list children (no
 * /proc/PID/task/TID/children: then the marker sweep below is used). */
static int reap_descendants(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    for (int round = 0; round < 4000; round++) {
        int status;
        while (waitpid(-1, &status, WNOHANG) > 0)
            ;
        FILE *f = fopen(path, "r");
        if (!f)
            return -1;
        long pid;
        int found = 0;
        while (fscanf(f, "%ld", &pid) == 1) {
            kill((pid_t)-pid, SIGKILL); /* its group, if it leads one */
            kill((pid_t)pid, SIGKILL);
            found++;
        }
        fclose(f);
        if (!found && waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD)
            return 0;
        struct timespec pause = {0, 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return 0;
}

/* Kill every process listed in the ':'-separated cgroup.procs files (but us); returns how many. */
static int kill_cgroups(const char *files)
{
    int found = 0;
    char *list = strdup(files);
    for (char *file = strtok(list, ":"); file; file = strtok(NULL, ":")) {
        FILE *f = fopen(file, "r");
        if (!f)
            continue;
        long pid;
        while (fscanf(f, "%ld", &pid) == 1) {
            if (pid != getpid() && pid > 1) {
                kill((pid_t)pid, SIGKILL);
                found++;
            }
        }
        fclose(f);
    }
    free(list);
    return found;
}

/* execvp, again while the file is busy: idrrun writes a fresh copy of each executable, and a
 * thread of idrrun that forks at that moment gives its child the copy's write descriptor until
 * that child execs: then exec fails with ETXTBSY for a few microseconds (the classic race of
 * a threaded program that writes an executable and runs it). */
static void exec_program(char **program)
{
    struct timespec pause = {0, 2 * 1000 * 1000};
    for (int tries = 0; tries < 500; tries++) {
        execvp(program[0], program);
        if (errno != ETXTBSY)
            return;
        nanosleep(&pause, NULL);
    }
}

/* Kill every process of UID (a box's own, fresh uid): kill(-1) from a child that became that
 * user reaches exactly its processes, whatever they did to their environment or group. */
static void kill_uid(long uid)
{
    for (int round = 0; round < 3; round++) {
        pid_t pid = fork();
        if (pid < 0)
            return;
        if (pid == 0) {
            if (setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 || setuid((uid_t)uid) != 0)
                _exit(1);
            _exit(kill(-1, SIGKILL) == 0 ? 0 : 2); /* 2: ESRCH, nothing of it was left */
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return;
    }
}

/* Kill every process whose environment holds MARKER; returns how many were found. */
static int sweep(const char *marker)
{
    int found = 0;
    size_t mlen = strlen(marker);
    DIR *proc = opendir("/proc");
    if (!proc)
        return 0;
    struct dirent *e;
    static char buf[1 << 16];
    while ((e = readdir(proc)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 1 || pid == getpid())
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/environ", pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf);
        close(fd);
        if (n > 0 && memmem(buf, (size_t)n, marker, mlen) != NULL) {
            kill((pid_t)pid, SIGKILL);
            found++;
        }
    }
    closedir(proc);
    return found;
}

/* Moving a process into a cgroup the usual way (its pid written to cgroup.procs) takes the
 * kernel's global cgroup_threadgroup_rwsem for writing, which waits for an RCU grace period:
 * 10-13 ms on the 2-core machine whenever no other migration happened in the last few ms, as
 * after every compile (benchmarks/RESULTS.md), for a program that runs in 1 ms. Two ways
 * around it, each measured at 0.3-0.8 ms:
 * - cgroup v1: the guard, single-threaded, moves only its own thread by writing "0" to the
 *   cgroup's `tasks` file; the kernel skips the global lock for the current thread (Linux
 *   >= 6.0) and the program, forked after, is born inside;
 * - cgroup v2 (a thread cannot leave its domain there): the program is forked straight into
 *   the cgroup with clone3(CLONE_INTO_CGROUP) (Linux >= 5.7); no migration at all.
 * Anything else (older kernels, headers without clone3) falls back to cgroup.procs. */
static void join_by_procs(const char *file)
{
    char pid[32];
    snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    int fd = open(file, O_WRONLY);
    if (fd < 0 || write(fd, pid, strlen(pid)) < 0)
        fprintf(stderr, "idrrun-guard: cannot join %s: %s\n", file, strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* clone3's arguments come with the kernel's headers, which glibc's include path has and musl's
 * (the guard's first build, isolation.py) has not: there they are Linux 5.7's, declared here. */
#if __has_include(<linux/sched.h>)
#include <linux/sched.h>
#elif defined(SYS_clone3)
#define CLONE_INTO_CGROUP 0x200000000ULL
struct clone_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
        set_tid_size, cgroup;
};
#endif

#if defined(CLONE_INTO_CGROUP) && defined(SYS_clone3)
#define HAVE_CLONE_INTO_CGROUP 1
#endif

/* The v2 cgroup the program is to be forked into (fork_into): its cgroup.procs file, and a
 * descriptor of its folder (-1: none). */
static char v2_procs[4096];
static int v2_fd = -1;

/* Joins the cgroups of FILES (':'-separated cgroup.procs paths): v1 ones now, by "0" to their
 * tasks file; the first v2 one is kept for fork_into when clone3 can be had. */
static void join_cgroups(const char *files)
{
    char *list = strdup(files);
    for (char *file = strtok(list, ":"); file; file = strtok(NULL, ":")) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", file);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        char tasks[4200];
        snprintf(tasks, sizeof tasks, "%s/tasks", dir);
        int fd = open(tasks, O_WRONLY); /* only v1 has a tasks file */
        if (fd >= 0) {
            int ok = write(fd, "0", 1) == 1;
            close(fd);
            if (!ok)
                join_by_procs(file);
            continue;
        }
#ifdef HAVE_CLONE_INTO_CGROUP
        if (v2_fd < 0 && (v2_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
            snprintf(v2_procs, sizeof v2_procs, "%s", file);
            continue;
        }
#endif
        join_by_procs(file);
    }
    free(list);
}

/* fork(), the child born in the v2 cgroup kept by join_cgroups when there is one. */
static pid_t fork_into(void)
{
#ifdef HAVE_CLONE_INTO_CGROUP
    if (v2_fd >= 0) {
        struct clone_args args;
        memset(&args, 0, sizeof args);
        args.flags = CLONE_INTO_CGROUP;
        args.exit_signal = SIGCHLD;
        args.cgroup = (uint64_t)v2_fd;
        long pid = syscall(SYS_clone3, &args, sizeof args);
        if (pid == 0)
            return 0; /* the child: v2_fd closes at exec */
        close(v2_fd);
        v2_fd = -1;
        if (pid > 0)
            return (pid_t)pid;
        join_by_procs(v2_procs); /* no clone3 here, or not into this cgroup: the usual way */
    }
#endif
    return fork();
}

static void write_status(const char *text)
{
    ssize_t ignored = write(status_fd, text, strlen(text));
    (void)ignored;
}

static void set_limit(int resource, const char *value)
{
    rlim_t v = (rlim_t)strtoull(value, NULL, 10);
    if (v == 0)
        return;
    struct rlimit rl = {v, v};
    if (setrlimit(resource, &rl) != 0)
        fprintf(stderr, "idrrun-guard: cannot set limit %d: %s\n", resource, strerror(errno));
}

/* The soft stack limit, raised or lowered but never above the hard one: a user may not raise
 * that, and asking for more than it allows must not cost the run (nor print on every run). */
static void set_stack(const char *value)
{
    long long v = strtoll(value, NULL, 10);
    struct rlimit rl;
    if (v == 0 || getrlimit(RLIMIT_STACK, &rl) != 0)
        return;
    rlim_t want = v < 0 ? RLIM_INFINITY : (rlim_t)v;
    if (rl.rlim_max != RLIM_INFINITY && (want == RLIM_INFINITY || want > rl.rlim_max))
        want = rl.rlim_max;
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_STACK, &rl) != 0)
        fprintf(stderr, "idrrun-guard: cannot set the stack limit: %s\n", strerror(errno));
}

/* The CPUs the program may run on, ':'-separated ("": as inherited). A CPU the kernel refuses
 * (outside the machine's cpuset) leaves the program where it was, and says so. */
static void set_cpus(const char *list)
{
    if (!list[0])
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    char *copy = strdup(list);
    for (char *word = strtok(copy, ":"); word; word = strtok(NULL, ":")) {
        long cpu = strtol(word, NULL, 10);
        if (cpu >= 0 && cpu < CPU_SETSIZE)
            CPU_SET((int)cpu, &set);
    }
    free(copy);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        fprintf(stderr, "idrrun-guard: cannot run on CPUs %s: %s\n", list, strerror(errno));
}

/* The options, in the order of GuardArgs' fields, then InnerGuardArgs' (guard.py). */
static const char *const OPTIONS[] = {"status-fd", "parent", "file-size", "nproc", "address-space",
                                      "cgroups", "uid", "gid", "sweep", "stack", "cpus", NULL};
enum { OPT_STATUS_FD, OPT_PARENT, OPT_FILE_SIZE, OPT_NPROC, OPT_ADDRESS_SPACE, OPT_CGROUPS,
       OPT_UID, OPT_GID, OPT_SWEEP, OPT_STACK, OPT_CPUS, OPT_COUNT };
static const char *const INNER_OPTIONS[] = {"inner-status-fd", NULL};

/* Reads --name=value options up to "--"; returns the index of the program, or -1. */
static int parse(int argc, char **argv, const char *const *names, const char **value, int count)
{
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        int known = 0;
        for (int k = 0; names[k]; k++) {
            size_t len = strlen(names[k]);
            if (strncmp(argv[i], "--", 2) == 0 && strncmp(argv[i] + 2, names[k], len) == 0 &&
                argv[i][2 + len] == '=') {
                value[k] = argv[i] + 3 + len;
                known = 1;
            }
        }
        if (!known) {
            fprintf(stderr, "idrrun-guard: unknown option %s\n", argv[i]);
            return -1;
        }
    }
    for (int k = 0; k < count; k++) {
        if (!value[k]) {
            fprintf(stderr, "idrrun-guard: missing --%s=\n", names[k]);
            return -1;
        }
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "idrrun-guard: no program after --\n");
        return -1;
    }
    return i + 1;
}

static void forward_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGXFSZ, SIG_IGN); /* the guard's own status writes must not kill it */
}

static void default_signals(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
}

static int report(int st, const char *prefix)
{
    char line[64];
    if (WIFSIGNALED(st)) {
        snprintf(line, sizeof line, "%ssignal %d\n", prefix, WTERMSIG(st));
        write_status(line);
        return 128 + WTERMSIG(st);
    }
    snprintf(line, sizeof line, "%sexit %d\n", prefix, WEXITSTATUS(st));
    write_status(line);
    return WEXITSTATUS(st);
}

/* Inside the sandbox: start the program, say how it ended. */
static int inner(int argc, char **argv)
{
    const char *value[1] = {0};
    int prog = parse(argc, argv, INNER_OPTIONS, value, 1);
    if (prog < 0)
        return 125;
    status_fd = atoi(value[0]);
    fcntl(status_fd, F_SETFD, FD_CLOEXEC);
    /* Same user as the program: undumpable, it cannot be traced nor have its descriptors
     * opened through /proc by the program it supervises. */
    prctl(PR_SET_DUMPABLE, 0);
    forward_signals();
    pid_t pid = fork();
    if (pid < 0)
        return 125;
    if (pid == 0) {
        default_signals();
        /* The launch mark: the box was made, the program is what runs from here on. Written
         * before the exec, on a pipe the program never holds: whatever it does next (kill this
         * guard, print what bubblewrap prints) cannot undo it. */
        write_status("inner launched\n");
        exec_program(argv + prog);
        fprintf(stderr, "idrrun-guard: cannot run %s: %s\n", argv[prog], strerror(errno));
        _exit(127);
    }
    child_pid = pid;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return report(st, "inner ");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strncmp(argv[1], "--inner-", 8) == 0)
        return inner(argc, argv);
    const char *value[OPT_COUNT] = {0};
    int prog = parse(argc, argv, OPTIONS, value, OPT_COUNT);
    if (prog < 0)
        return 125;
    char **program = argv + prog;
    status_fd = atoi(value[OPT_STATUS_FD]);
    fcntl(status_fd, F_SETFD, FD_CLOEXEC); /* never inherited by the program */
    parent_pid = (pid_t)atol(value[OPT_PARENT]);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    int subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
    if (getppid() != parent_pid)
        return 125; /* idrrun is already gone */
    long uid = atol(value[OPT_UID]), gid = atol(value[OPT_GID]);

    char marker[256] = "";
    const char *run_id = getenv("IDRRUN_RUN");
    if (run_id)
        snprintf(marker, sizeof marker, "IDRRUN_RUN=%s", run_id);

    join_cgroups(value[OPT_CGROUPS]);
    set_limit(RLIMIT_FSIZE, value[OPT_FILE_SIZE]);
    set_limit(RLIMIT_NPROC, value[OPT_NPROC]);
    set_limit(RLIMIT_AS, value[OPT_ADDRESS_SPACE]);
    set_stack(value[OPT_STACK]);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    forward_signals();

    pid_t pid = fork_into();
    if (pid < 0) {
        fprintf(stderr, "idrrun-guard: fork: %s\n", strerror(errno));
        return 125;
    }
    if (pid == 0) {
        setpgid(0, 0);
        default_signals();
        set_cpus(value[OPT_CPUS]);
        if (gid >= 0 && (setgroups(0, NULL) != 0 || setgid((gid_t)gid) != 0)) {
            fprintf(stderr, "idrrun-guard: cannot become group %ld: %s\n", gid, strerror(errno));
            _exit(126);
        }
        if (uid >= 0 && setuid((uid_t)uid) != 0) {
            fprintf(stderr, "idrrun-guard: cannot become user %ld: %s\n", uid, strerror(errno));
            _exit(126);
        }
        exec_program(program);
        fprintf(stderr, "idrrun-guard: cannot run %s: %s\n", program[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no race with the child's own call */
    child_pid = pid;
    char line[64];
    snprintf(line, sizeof line, "child %d\n", (int)pid);
    write_status(line);

    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    /* The program is gone: whatever it left behind goes too. Its cgroups list every process
     * of the run; without them, the marker finds those that left the group with setsid().
     * (In a sandbox's PID namespace nothing outlives the box: no sweep is asked for.) */
    kill(-pid, SIGKILL);
    struct timespec pause = {0, 5 * 1000 * 1000};
    if (subreaper && reap_descendants() == 0) {
        /* every descendant was ours, and is gone */
    } else if (value[OPT_CGROUPS][0]) {
        for (int round = 0; round < 400 && kill_cgroups(value[OPT_CGROUPS]) > 0; round++)
            nanosleep(&pause, NULL);
    } else if (marker[0] && atoi(value[OPT_SWEEP])) {
        for (int round = 0; round < 400 && sweep(marker) > 0; round++)
            nanosleep(&pause, NULL);
    }
    if (uid > 0 && atoi(value[OPT_SWEEP]))
        kill_uid(uid);
    return report(st, "");
}
