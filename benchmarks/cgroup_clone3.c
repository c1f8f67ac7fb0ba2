/* One child into the cgroup folder argv[1], timed (ms on stdout), argv[2] saying how:
 *   procs   fork, then the child writes its pid to cgroup.procs (a migration)
 *   clone3  the child born there with clone3(CLONE_INTO_CGROUP) (cgroup v2, Linux >= 5.7)
 * For benchmarks/box_cost.py --cgroup: Python has no clone3. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    double start = now_ms();
    pid_t pid;
    if (strcmp(argv[2], "procs") == 0) {
        pid = fork();
        if (pid == 0) {
            char path[4096];
            snprintf(path, sizeof path, "%s/cgroup.procs", argv[1]);
            int fd = open(path, O_WRONLY);
            _exit(fd < 0 || dprintf(fd, "%d\n", (int)getpid()) < 0 ? 1 : 0);
        }
    } else {
        struct clone_args args;
        memset(&args, 0, sizeof args);
        args.flags = CLONE_INTO_CGROUP;
        args.exit_signal = SIGCHLD;
        args.cgroup = (__u64)open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
        if (pid == 0)
            _exit(0);
    }
    int status = 1;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || status != 0)
        return 1;
    printf("%.3f\n", now_ms() - start);
    return 0;
}
