/* idrrun-guard: the supervisor between idrrun and a student's program.
 *
 * usage: idrrun-guard STATUS PARENT FSIZE NPROC AS CGROUPS -- PROGRAM [ARGS...]
 *   STATUS   file where the guard writes "child PID", then "exit N" or "signal N"
 *   PARENT   pid of idrrun (the kernel); when it dies, the guard kills the whole run
 *   FSIZE, NPROC, AS  resource limits in bytes/tasks (0: none) for the program
 *   CGROUPS  ':'-separated cgroup.procs files to join before starting the program ("-": none)
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

static void write_status(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd >= 0) {
        ssize_t ignored = write(fd, text, strlen(text));
        (void)ignored;
        close(fd);
    }
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

int main(int argc, char **argv)
{
    if (argc < 9 || strcmp(argv[7], "--") != 0) {
        fprintf(stderr, "usage: idrrun-guard STATUS PARENT FSIZE NPROC AS CGROUPS -- PROGRAM [ARGS...]\n");
        return 125;
    }
    const char *status = argv[1];
    parent_pid = (pid_t)atol(argv[2]);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent_pid)
        return 125; /* idrrun is already gone */

    char marker[256] = "";
    const char *run_id = getenv("IDRRUN_RUN");
    if (run_id)
        snprintf(marker, sizeof marker, "IDRRUN_RUN=%s", run_id);

    if (strcmp(argv[6], "-") != 0) {
        char *list = strdup(argv[6]);
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
    set_limit(RLIMIT_FSIZE, argv[3]);
    set_limit(RLIMIT_NPROC, argv[4]);
    set_limit(RLIMIT_AS, argv[5]);
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
        execvp(argv[8], argv + 8);
        fprintf(stderr, "idrrun-guard: cannot run %s: %s\n", argv[8], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no race with the child's own call */
    child_pid = pid;
    char line[64];
    snprintf(line, sizeof line, "child %d\n", (int)pid);
    write_status(status, line);

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
        write_status(status, line);
        return 128 + WTERMSIG(st);
    }
    snprintf(line, sizeof line, "exit %d\n", WEXITSTATUS(st));
    write_status(status, line);
    return WEXITSTATUS(st);
}
