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

/* A private server from an installed basedir: install, start, clean shutdown. */
#ifndef PROFILE_LOAD_SERVER_H
#define PROFILE_LOAD_SERVER_H

#include <limits.h>
#include <sys/types.h>

/* The socket lives in the workdir, and a unix socket path has at most 107 bytes. */
#define SOCKET_NAME "/mariadbd.sock"
#define WORKDIR_MAX (108 - sizeof SOCKET_NAME)
#define MAX_PLUGIN_OPTIONS 8
#define PLUGIN_OPTION_MAX (PATH_MAX + 96)

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
    char plugin_dir[PATH_MAX + 32]; /* "" unless a plugin is loaded at the start */
    char plugin_options[MAX_PLUGIN_OPTIONS][PLUGIN_OPTION_MAX]; /* mariadbd's, to load them */
    int plugin_option_count;
    pid_t pid; /* 0 when not running */
};

/* Each returns EXIT_OK or EXIT_SERVER (EXIT_USAGE for a bad --basedir) after printing why. */
/* Finds the programs in basedir; creates nothing. */
int server_init(struct server *s, const char *basedir);
/* setup_counters: where an instrumented bootstrap writes its counters (NULL: in the
   work directory), so that they stay out of the training's profile. */
int server_make_workdir(struct server *s, const char *workdir, const char *setup_counters);
/* Looks for library.so in the plugin directory of basedir's install layout. Found: returns 1,
   and server_start loads it as plugin (which must then start, or the server does not).
   Not found: returns 0 and says where it looked in why. */
int server_add_plugin(struct server *s, const char *library, const char *plugin, char *why,
                      size_t why_size);
int server_install(struct server *s);
int server_start(struct server *s);
int server_stop(struct server *s);

/* After the workload lost its connection: says how the process ended, if it did. */
void server_explain_death(struct server *s);
void server_print_log_tail(const struct server *s);
void server_remove_workdir(struct server *s);

#endif
