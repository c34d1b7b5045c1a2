/* A private server from an installed basedir: install, start, clean shutdown. */
#ifndef PROFILE_LOAD_SERVER_H
#define PROFILE_LOAD_SERVER_H

#include <limits.h>
#include <sys/types.h>

/* The socket lives in the workdir, and a unix socket path has at most 107 bytes. */
#define SOCKET_NAME "/mariadbd.sock"
#define WORKDIR_MAX (108 - sizeof SOCKET_NAME)

struct server {
    char basedir[PATH_MAX];
    char workdir[WORKDIR_MAX];
    int workdir_is_ours; /* a temp dir we made: removed after a successful run */
    char mariadbd[PATH_MAX];
    char install_db[PATH_MAX];
    char datadir[PATH_MAX];
    char socket[PATH_MAX];
    char error_log[PATH_MAX];
    char install_log[PATH_MAX];
    char setup_counters[PATH_MAX]; /* GCOV_PREFIX of the bootstrap */
    pid_t pid; /* 0 when not running */
};

/* Each returns EXIT_OK or EXIT_SERVER (EXIT_USAGE for a bad --basedir) after printing why. */
/* setup_counters: where an instrumented bootstrap writes its counters (NULL: in the
   work directory), so that they stay out of the training's profile. */
int server_init(struct server *s, const char *basedir, const char *workdir,
                const char *setup_counters);
int server_install(struct server *s);
int server_start(struct server *s);
int server_stop(struct server *s);

/* After the workload lost its connection: says how the process ended, if it did. */
void server_explain_death(struct server *s);
void server_print_log_tail(const struct server *s);
void server_remove_workdir(struct server *s);

#endif
