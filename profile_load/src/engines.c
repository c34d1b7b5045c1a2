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

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "engines.h"

#define WHY_MAX (PATH_MAX + 128)

static char reasons[ENGINE_COUNT][WHY_MAX];

/* A selected engine the server lacks: left out of a default run (a `minimal` build has no
   RocksDB, and its training must run what it always ran), refused when --engines named it.
   why is printed; reason goes into the report, which is archived with the profile: it names
   no path of the machine that trained. */
static int absent(int e, int given, const char *why, const char *reason,
                  const char *missing[ENGINE_COUNT])
{
    if (given) {
        fprintf(stderr, "profile_load: cannot train %s (--engines): %s\n",
                engine_names[e], why);
        return EXIT_USAGE;
    }
    snprintf(reasons[e], sizeof reasons[e], "%s", reason);
    missing[e] = reasons[e];
    printf("not training %s: %s\n", engine_names[e], why);
    return EXIT_OK;
}

int engines_in_basedir(struct server *s, const unsigned char selected[ENGINE_COUNT], int given,
                       const char *missing[ENGINE_COUNT])
{
    char why[WHY_MAX], reason[128];
    for (int e = 0; e < ENGINE_COUNT; e++) {
        if (!selected[e] || !engine_plugin[e])
            continue;
        snprintf(reason, sizeof reason, "no %s.so in the server's plugin directory",
                 engine_plugin[e]);
        /* The plugin's name is the engine's: ROCKSDB, whose FORCE option is --rocksdb. */
        if (server_add_plugin(s, engine_plugin[e], engine_names[e], why, sizeof why))
            printf("training %s: loading %s.so from %s\n", engine_names[e], engine_plugin[e],
                   s->plugin_dir);
        else
            TRY(absent(e, given, why, reason, missing));
    }
    return EXIT_OK;
}

/* Sets why when the server cannot run engine e. */
static int ask_server(struct client *c, int e, char *why, size_t why_size)
{
    struct outcome out;
    TRY(client_exec(c, "SELECT SUPPORT FROM information_schema.ENGINES WHERE ENGINE = ?",
                    PARAMS(P_TEXT(engine_sql[e])), &out));
    why[0] = '\0';
    if (out.rows == 0)
        snprintf(why, why_size, "the server has no %s engine (information_schema.ENGINES)",
                 engine_sql[e]);
    else if (strcmp(out.first_row[0], "YES") != 0 && strcmp(out.first_row[0], "DEFAULT") != 0)
        snprintf(why, why_size, "the server's %s engine is not available"
                                " (information_schema.ENGINES: SUPPORT %s)",
                 engine_sql[e], out.first_row[0]);
    return EXIT_OK;
}

int engines_in_server(const struct target *t, const unsigned char selected[ENGINE_COUNT],
                      int given, const char *missing[ENGINE_COUNT])
{
    struct client c;
    int connected = 0;
    int rc = EXIT_OK;
    char why[WHY_MAX];
    for (int e = 0; rc == EXIT_OK && e < ENGINE_COUNT; e++) {
        if (!selected[e] || !engine_plugin[e])
            continue;
        if (!connected && (rc = client_connect(&c, t, API_TEXT, 0)) != EXIT_OK)
            return rc;
        connected = 1;
        rc = ask_server(&c, e, why, sizeof why);
        if (rc == EXIT_OK && why[0])
            rc = absent(e, given, why, why, missing);
    }
    if (connected)
        client_close(&c);
    return rc;
}
