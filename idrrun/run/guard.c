/* idrrun-guard: the supervisor between idrrun and a student's program.
 *
 * usage: idrrun-guard --status-fd=N --parent=PID --file-size=B --nproc=N --address-space=B
 *                     --cgroups=F1:F2 -- PROGRAM [ARGS...]
 * The options are those of the record GuardArgs in guard.py (a test checks that the two agree):
 *   status-fd      pipe to idrrun: the guard writes "child PID", then "exit N" or "signal N";
 *                  the program never inherits it, so it cannot forge its own status
 *   parent         pid of idrrun (the kernel); when it dies, the guard kills the whole run
 *   file-size, nproc, address-space  resource limits in bytes/tasks (0: none) for the program
 *   cgroups        ':'-separated cgroup.procs files to join before starting the program ("": none)
 *
 * Why a separate process: a Jupyter kernel can be killed (restart, crash) while a program runs.
 * Nothing in the kernel runs then, but the guard is told (PR_SET_PDEATHSIG) and removes every
 * process of the run, also those that left the process group with setsid(): they all carry the
 * IDRRUN_RUN marker in their environment, which the guard looks for in /proc.
 * Written in C so that it costs a millisecond per run, not an interpreter's start-up.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t child_pid = 0;
static pid_t parent_pid = 0;

static void on_signal(int sig)
{
    if (child_pid <= 0)
        return;
    /* Our parent died (PR_SET_PDEATHSIG): nobody will escalate, so kill outright. */
    if (getppid() != parent_pid)
        sig = SIGKILL;
    kill(-child_pid, sig);
    if (sig == SIGKILL || sig == SIGTERM)
        kill(-child_pid, SIGCONT); /* a stopped program must see its SIGTERM */
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

static int status_fd;

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

/* The options, in the order of GuardArgs' fields. */
static const char *const OPTIONS[] = {"status-fd", "parent", "file-size", "nproc", "address-space",
                                      "cgroups", NULL};
enum { OPT_STATUS_FD, OPT_PARENT, OPT_FILE_SIZE, OPT_NPROC, OPT_ADDRESS_SPACE, OPT_CGROUPS, OPT_COUNT };


int main(int argc, char **argv)
{
    const char *value[OPT_COUNT] = {0};
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        int known = 0;
        for (int k = 0; OPTIONS[k]; k++) {
            size_t len = strlen(OPTIONS[k]);
            if (strncmp(argv[i], "--", 2) == 0 && strncmp(argv[i] + 2, OPTIONS[k], len) == 0 &&
                argv[i][2 + len] == '=') {
                value[k] = argv[i] + 3 + len;
                known = 1;
            }
        }
        if (!known) {
            fprintf(stderr, "idrrun-guard: unknown option %s\n", argv[i]);
            return 125;
        }
    }
    for (int k = 0; k < OPT_COUNT; k++) {
        if (!value[k]) {
            fprintf(stderr, "idrrun-guard: missing --%s=\n", OPTIONS[k]);
            return 125;
        }
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "idrrun-guard: no program after --\n");
        return 125;
    }
    char **program = argv + i + 1;
    status_fd = atoi(value[OPT_STATUS_FD]);
    fcntl(status_fd, F_SETFD, FD_CLOEXEC); /* never inherited by the program */
    parent_pid = (pid_t)atol(value[OPT_PARENT]);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent_pid)
        return 125; /* idrrun is already gone */

    char marker[256] = "";
    const char *run_id = getenv("IDRRUN_RUN");
    if (run_id)
        snprintf(marker, sizeof marker, "IDRRUN_RUN=%s", run_id);

    if (value[OPT_CGROUPS][0]) {
        char *list = strdup(value[OPT_CGROUPS]);
        for (char *file = strtok(list, ":"); file; file = strtok(NULL, ":")) {
            char pid[32];
            snprintf(pid, sizeof pid, "%d\n", (int)getpid());
            int fd = open(file, O_WRONLY);
            if (fd < 0 || write(fd, pid, strlen(pid)) < 0)
                fprintf(stderr, "idrrun-guard: cannot join %s: %s\n", file, strerror(errno));
            if (fd >= 0)
                close(fd);
        }
        free(list);
    }
    set_limit(RLIMIT_FSIZE, value[OPT_FILE_SIZE]);
    set_limit(RLIMIT_NPROC, value[OPT_NPROC]);
    set_limit(RLIMIT_AS, value[OPT_ADDRESS_SPACE]);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGXFSZ, SIG_IGN); /* the guard's own status writes must not kill it */

    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "idrrun-guard: fork: %s\n", strerror(errno));
        return 125;
    }
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGXFSZ, SIG_DFL);
        execvp(program[0], program);
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
    /* The program is gone: whatever it left behind goes too. */
    kill(-pid, SIGKILL);
    if (marker[0]) {
        for (int round = 0; round < 40 && sweep(marker) > 0; round++) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    if (WIFSIGNALED(st)) {
        snprintf(line, sizeof line, "signal %d\n", WTERMSIG(st));
        write_status(line);
        return 128 + WTERMSIG(st);
    }
    snprintf(line, sizeof line, "exit %d\n", WEXITSTATUS(st));
    write_status(line);
    return WEXITSTATUS(st);
}
