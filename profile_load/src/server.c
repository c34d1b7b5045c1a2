/* Copyright (c) 2026, the PGO pipeline authors

   This program is free software; you can redistribute it and/or modify
   it under the terms of the GNU General Public License as published by
   the Free Software Foundation; version 2 of the License.

   This program is distributed in the hope that it will be useful,
   but WITHOUT ANY WARRANTY; without even the implied warranty of
   MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
   GNU General Public License for more details.

   You should have received a copy of the GNU General Public License
   along with this program; if not, write to the Free Software
   Foundation, Inc., 51 Franklin St, Fifth Floor, Boston, MA 02110-1335  USA */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

#include "matrix.h"
#include "server.h"

/* An instrumented server is slow to start, and slow to exit: it writes its counters then. */
#define START_TIMEOUT_SECONDS 180
#define STOP_TIMEOUT_SECONDS 300
#define LOG_TAIL_LINES 30

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int is_executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static int find_program(char *found, const char *basedir, const char *const *dirs,
                        const char *name)
{
    for (; *dirs; dirs++) {
        snprintf(found, PATH_MAX, "%s/%s/%s", basedir, *dirs, name);
        if (is_executable(found))
            return 1;
    }
    return 0;
}

static void print_file_tail(const char *path, int lines)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "profile_load: (no log at %s)\n", path);
        return;
    }
    static char buffer[65536];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long start = size > (long)sizeof buffer - 1 ? size - (long)sizeof buffer + 1 : 0;
    fseek(f, start, SEEK_SET);
    size_t n = fread(buffer, 1, sizeof buffer - 1, f);
    fclose(f);
    buffer[n] = '\0';
    char *tail = buffer + n;
    for (int seen = 0; tail > buffer; tail--)
        if (tail[-1] == '\n' && tail != buffer + n && ++seen == lines)
            break;
    fprintf(stderr, "---- last %d lines of %s ----\n%s", lines, path, tail);
    if (n && buffer[n - 1] != '\n')
        fprintf(stderr, "\n");
    fprintf(stderr, "---- end of %s ----\n", path);
}

void server_print_log_tail(const struct server *s)
{
    print_file_tail(s->error_log, LOG_TAIL_LINES);
}

static void describe_status(const char *what, int status)
{
    if (WIFEXITED(status))
        fprintf(stderr, "profile_load: %s exited with status %d\n", what, WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        fprintf(stderr, "profile_load: %s was killed by signal %d (%s)\n", what,
                WTERMSIG(status), strsignal(WTERMSIG(status)));
}

/* Runs argv with stdout and stderr into log; returns the wait status, or -1. */
static int run_logged(char *const argv[], const char *log)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int null = open("/dev/null", O_RDONLY);
        if (fd < 0 || null < 0)
            _exit(127);
        dup2(null, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

static int make_dir(const char *path)
{
    if (mkdir(path, 0700) == 0)
        return 1;
    fprintf(stderr, "profile_load: cannot create %s: %s\n", path, strerror(errno));
    return 0;
}

int server_init(struct server *s, const char *basedir)
{
    static const char *const server_dirs[] = {"bin", "sbin", "libexec", NULL};
    static const char *const script_dirs[] = {"scripts", "bin", NULL};
    memset(s, 0, sizeof *s);

    if (!realpath(basedir, s->basedir)) {
        fprintf(stderr, "profile_load: --basedir %s: %s\n", basedir, strerror(errno));
        return EXIT_USAGE;
    }
    if (!find_program(s->mariadbd, s->basedir, server_dirs, "mariadbd")) {
        fprintf(stderr, "profile_load: no mariadbd in %s/{bin,sbin,libexec}\n", s->basedir);
        return EXIT_USAGE;
    }
    if (!find_program(s->install_db, s->basedir, script_dirs, "mariadb-install-db")) {
        fprintf(stderr, "profile_load: no mariadb-install-db in %s/{scripts,bin}\n", s->basedir);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int server_make_workdir(struct server *s, const char *workdir, const char *setup_counters)
{
    char path[PATH_MAX];
    if (workdir) {
        if (mkdir(workdir, 0700) != 0 && errno != EEXIST) {
            fprintf(stderr, "profile_load: cannot create --workdir %s: %s\n", workdir,
                    strerror(errno));
            return EXIT_SERVER;
        }
        if (!realpath(workdir, path)) {
            fprintf(stderr, "profile_load: --workdir %s: %s\n", workdir, strerror(errno));
            return EXIT_SERVER;
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/profile_load.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(path)) {
            fprintf(stderr, "profile_load: cannot create a temp dir: %s\n", strerror(errno));
            return EXIT_SERVER;
        }
        s->workdir_is_ours = 1;
    }
    if (strlen(path) >= WORKDIR_MAX) {
        fprintf(stderr, "profile_load: work directory %s is too long for a unix socket path"
                        " (at most %zu bytes); use a shorter --workdir\n", path,
                WORKDIR_MAX - 1);
        if (s->workdir_is_ours)
            rmdir(path);
        return EXIT_SERVER;
    }
    strcpy(s->workdir, path);

    snprintf(s->datadir, sizeof s->datadir, "%s/data", s->workdir);
    snprintf(s->socket, sizeof s->socket, "%s" SOCKET_NAME, s->workdir);
    snprintf(s->error_log, sizeof s->error_log, "%s/mariadbd.err", s->workdir);
    snprintf(s->install_log, sizeof s->install_log, "%s/install-db.log", s->workdir);
    if (setup_counters) {
        if (mkdir(setup_counters, 0700) != 0 && errno != EEXIST) {
            fprintf(stderr, "profile_load: cannot create --setup-counters %s: %s\n",
                    setup_counters, strerror(errno));
            return EXIT_SERVER;
        }
        if (!realpath(setup_counters, s->setup_counters)) {
            fprintf(stderr, "profile_load: --setup-counters %s: %s\n", setup_counters,
                    strerror(errno));
            return EXIT_SERVER;
        }
    } else {
        snprintf(s->setup_counters, sizeof s->setup_counters, "%s/setup-counters", s->workdir);
    }
    if (access(s->datadir, F_OK) == 0) {
        fprintf(stderr, "profile_load: %s already exists; the workload needs a fresh"
                        " datadir, give an empty --workdir\n", s->datadir);
        return EXIT_SERVER;
    }
    return EXIT_OK;
}

/* The plugin directory (INSTALL_PLUGINDIR) of each install layout of MariaDB's CMake: the
   standalone one (a bintar; the `minimal` configurations' stage), DEB (the release
   configurations' stage, and Debian's own /usr) and RPM. mariadbd looks in its layout's one,
   relative to --basedir; server_start names the one the library was found in as --plugin-dir,
   so that the server loads the very file found here. */
static const char *const plugin_dirs[] = {"lib/plugin", "lib/mysql/plugin", "lib64/mysql/plugin",
                                          NULL};

static int add_server_option(struct server *s, const char *format, const char *value)
{
    if (s->plugin_option_count == MAX_PLUGIN_OPTIONS)
        return 0;
    int n = snprintf(s->plugin_options[s->plugin_option_count], PLUGIN_OPTION_MAX, format, value);
    if (n < 0 || n >= PLUGIN_OPTION_MAX)
        return 0;
    s->plugin_option_count++;
    return 1;
}

int server_add_plugin(struct server *s, const char *library, const char *plugin, char *why,
                      size_t why_size)
{
    char path[PATH_MAX + 128];
    for (const char *const *dir = plugin_dirs; *dir; dir++) {
        snprintf(path, sizeof path, "%s/%s/%s.so", s->basedir, *dir, library);
        if (access(path, R_OK) != 0)
            continue;
        /* An install tree has one layout, so a second library is in the same directory. */
        snprintf(s->plugin_dir, sizeof s->plugin_dir, "%s/%s", s->basedir, *dir);
        /* Loaded at the start, as Debian's mariadb-plugin-rocksdb does (its rocksdb.cnf:
           plugin-load-add=ha_rocksdb.so): the server trained is the server users run, the
           plugin initialised with it, and the workload sends no extra statement. INSTALL
           SONAME would run the plugin's install path, a one-time administration statement,
           and write mysql.plugin. FORCE: a library that does not load or initialise stops the
           start, with its error in the log, rather than leave the engine out unnoticed. */
        char option[PLUGIN_OPTION_MAX];
        snprintf(option, sizeof option, "--%s=FORCE", plugin);
        int first = s->plugin_option_count == 0;
        if ((first && !add_server_option(s, "--plugin-dir=%s", s->plugin_dir)) ||
            !add_server_option(s, "--plugin-load-add=%s", library) ||
            !add_server_option(s, "%s", option)) {
            snprintf(why, why_size, "too many plugin options for mariadbd to load %s", path);
            return 0;
        }
        return 1;
    }
    snprintf(why, why_size, "no %s.so in %s/{", library, s->basedir);
    for (const char *const *dir = plugin_dirs; *dir; dir++)
        snprintf(why + strlen(why), why_size - strlen(why), "%s%s", *dir, dir[1] ? "," : "}");
    return 0;
}

int server_install(struct server *s)
{
    char basedir[PATH_MAX + 16], datadir[PATH_MAX + 16];
    snprintf(basedir, sizeof basedir, "--basedir=%s", s->basedir);
    snprintf(datadir, sizeof datadir, "--datadir=%s", s->datadir);
    char *argv[] = {s->install_db, "--no-defaults", basedir, datadir,
                    "--auth-root-authentication-method=normal",
                    geteuid() == 0 ? "--user=root" : NULL, NULL};

    printf("installing a private datadir in %s\n", s->datadir);
    fflush(stdout);
    /* The bootstrap runs the server over the system tables' SQL: thousands of statements
       and long parser loops that no user runs. Its counters would raise the hot threshold
       of the objects it runs (GCC: an object's largest counter / 10000) and count as one
       more run; GCOV_PREFIX writes them under another directory. */
    setenv("GCOV_PREFIX", s->setup_counters, 1);
    int status = run_logged(argv, s->install_log);
    unsetenv("GCOV_PREFIX");
    char check[PATH_MAX + 32];
    snprintf(check, sizeof check, "%s/mysql/global_priv.frm", s->datadir);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "profile_load: mariadb-install-db failed\n");
        if (status != -1)
            describe_status("mariadb-install-db", status);
    } else if (access(check, F_OK) != 0) {
        fprintf(stderr, "profile_load: mariadb-install-db exited 0 but made no system tables"
                        " (%s is missing)\n", check);
    } else {
        return EXIT_OK;
    }
    print_file_tail(s->install_log, LOG_TAIL_LINES);
    return EXIT_SERVER;
}

static int try_connect(const char *socket_path, MYSQL **connection)
{
    MYSQL *mysql = mysql_init(NULL);
    unsigned protocol = MYSQL_PROTOCOL_SOCKET;
    unsigned timeout = 5;
    mysql_options(mysql, MYSQL_OPT_PROTOCOL, &protocol);
    mysql_options(mysql, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    if (mysql_real_connect(mysql, "localhost", "root", "", NULL, 0, socket_path, 0)) {
        *connection = mysql;
        return 1;
    }
    *connection = mysql; /* for the error message */
    return 0;
}

/* Reaps the server if it has exited; returns 1 and its wait status then. */
static int server_exited(struct server *s, int *status)
{
    if (s->pid <= 0)
        return 0;
    pid_t done = waitpid(s->pid, status, WNOHANG);
    if (done == s->pid) {
        s->pid = 0;
        return 1;
    }
    return 0;
}

static void kill_server(struct server *s)
{
    int status;
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    s->pid = 0;
}

int server_start(struct server *s)
{
    char files[PATH_MAX];
    snprintf(files, sizeof files, "%s/files", s->workdir);
    if (!make_dir(files))
        return EXIT_SERVER;

    char basedir[PATH_MAX + 16], datadir[PATH_MAX + 16], socket_opt[PATH_MAX + 16];
    char log_error[PATH_MAX + 16], secure[PATH_MAX + 32], pid_file[PATH_MAX + 32];
    snprintf(basedir, sizeof basedir, "--basedir=%s", s->basedir);
    snprintf(datadir, sizeof datadir, "--datadir=%s", s->datadir);
    snprintf(socket_opt, sizeof socket_opt, "--socket=%s", s->socket);
    snprintf(log_error, sizeof log_error, "--log-error=%s", s->error_log);
    snprintf(secure, sizeof secure, "--secure-file-priv=%s", files);
    snprintf(pid_file, sizeof pid_file, "--pid-file=%s/mariadbd.pid", s->workdir);
    /* --log-bin: without a binary log the binlog formats would change nothing. */
    char *argv[16 + MAX_PLUGIN_OPTIONS] = {s->mariadbd, "--no-defaults", basedir, datadir,
                                           socket_opt, "--skip-networking", secure, log_error,
                                           pid_file, "--log-bin=mariadb-bin", "--server-id=1"};
    int argc = 0;
    while (argv[argc])
        argc++;
    for (int i = 0; i < s->plugin_option_count; i++)
        argv[argc++] = s->plugin_options[i];
    if (geteuid() == 0)
        argv[argc++] = "--user=root";

    printf("starting %s\n", s->mariadbd);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "profile_load: fork: %s\n", strerror(errno));
        return EXIT_SERVER;
    }
    if (pid == 0) {
        /* Messages from before --log-error takes effect go to the same log. */
        int null = open("/dev/null", O_RDWR);
        int log = open(s->error_log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (null >= 0 && log >= 0) {
            dup2(null, 0);
            dup2(log, 1);
            dup2(log, 2);
        }
        execv(argv[0], argv);
        fprintf(stderr, "profile_load: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    s->pid = pid;

    double deadline = now() + START_TIMEOUT_SECONDS;
    for (;;) {
        int status;
        MYSQL *mysql;
        if (server_exited(s, &status)) {
            fprintf(stderr, "profile_load: mariadbd did not start\n");
            describe_status("mariadbd", status);
            server_print_log_tail(s);
            return EXIT_SERVER;
        }
        int up = try_connect(s->socket, &mysql);
        if (up || now() > deadline) {
            if (!up)
                fprintf(stderr, "profile_load: mariadbd did not answer on %s within %d s: %s\n",
                        s->socket, START_TIMEOUT_SECONDS, mysql_error(mysql));
            mysql_close(mysql);
            if (up)
                return EXIT_OK;
            kill_server(s);
            server_print_log_tail(s);
            return EXIT_SERVER;
        }
        mysql_close(mysql);
        sleep_ms(200);
    }
}

int server_stop(struct server *s)
{
    int status;
    MYSQL *mysql;
    if (s->pid <= 0)
        return EXIT_SERVER;

    printf("shutting down mariadbd\n");
    fflush(stdout);
    /* SIGTERM would stop it too, but SHUTDOWN is what the profile is meant to cover, and a
       server that cannot be reached here is already a failure worth reporting. */
    if (!try_connect(s->socket, &mysql)) {
        fprintf(stderr, "profile_load: cannot connect to shut the server down: %s\n",
                mysql_error(mysql));
        mysql_close(mysql);
        kill_server(s);
        server_print_log_tail(s);
        return EXIT_SERVER;
    }
    if (mysql_query(mysql, "SHUTDOWN") != 0) {
        fprintf(stderr, "profile_load: SHUTDOWN failed (%s, errno %u); trying mysql_shutdown()\n",
                mysql_error(mysql), mysql_errno(mysql));
        if (mysql_shutdown(mysql, SHUTDOWN_DEFAULT) != 0)
            fprintf(stderr, "profile_load: mysql_shutdown() failed: %s (errno %u)\n",
                    mysql_error(mysql), mysql_errno(mysql));
    }
    mysql_close(mysql);

    double deadline = now() + STOP_TIMEOUT_SECONDS;
    while (!server_exited(s, &status)) {
        if (now() > deadline) {
            fprintf(stderr, "profile_load: mariadbd did not exit within %d s of the shutdown;"
                            " killed it (no profile was written)\n", STOP_TIMEOUT_SECONDS);
            kill_server(s);
            server_print_log_tail(s);
            return EXIT_SERVER;
        }
        sleep_ms(100);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return EXIT_OK;
    fprintf(stderr, "profile_load: mariadbd did not shut down cleanly\n");
    describe_status("mariadbd", status);
    server_print_log_tail(s);
    return EXIT_SERVER;
}

void server_explain_death(struct server *s)
{
    int status;
    /* A crashing server may still be writing its stack trace: give it a moment. */
    for (int waited = 0; waited < 50; waited++) {
        if (server_exited(s, &status)) {
            describe_status("mariadbd", status);
            server_print_log_tail(s);
            return;
        }
        sleep_ms(100);
    }
    fprintf(stderr, "profile_load: mariadbd is still running; trying to shut it down\n");
    if (server_stop(s) == EXIT_OK)
        server_print_log_tail(s);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void server_remove_workdir(struct server *s)
{
    if (s->workdir_is_ours && s->pid == 0)
        nftw(s->workdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
