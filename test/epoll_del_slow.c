/*
 * epoll_del_slow.c - preloaded into a daemon under test (LD_PRELOAD): an
 * epoll_ctl(EPOLL_CTL_DEL) made on the process's main thread waits 20 ms
 * before it runs.  That widens a race to where a test meets it every
 * time: the main thread stopping libmicrohttpd's listener while its
 * threads serve (serve_test stop_amid_connections).  Every other call
 * goes straight to the C library's.
 */
#include <dlfcn.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int
epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	static int (*real)(int, int, int, struct epoll_event *);

	if (real == NULL) {
		*(void **)&real = dlsym(RTLD_NEXT, "epoll_ctl");
	}
	if (op == EPOLL_CTL_DEL && syscall(SYS_gettid) == getpid()) {
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return (real(epfd, op, fd, ev));
}
