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

/* Which of the selected engines the server has. The built-in ones are in every server; an
   engine that comes as a plugin (engine_plugin: RocksDB) is trained where the server has it. */
#ifndef PROFILE_LOAD_ENGINES_H
#define PROFILE_LOAD_ENGINES_H

#include "client.h"
#include "matrix.h"
#include "server.h"

/* Both set missing[e] to why a selected plugin engine is not trained, when the default
   selection had it, and return EXIT_OK; when --engines named it (given), they return
   EXIT_USAGE after a one-line message. */

/* Lifecycle mode, before the install: the plugin is loaded when the basedir has its library. */
int engines_in_basedir(struct server *s, const unsigned char selected[ENGINE_COUNT], int given,
                       const char *missing[ENGINE_COUNT]);

/* Connect-only mode: what the server reports in information_schema.ENGINES. Also returns
   EXIT_SERVER or EXIT_WORKLOAD when it cannot ask. */
int engines_in_server(const struct target *t, const unsigned char selected[ENGINE_COUNT],
                      int given, const char *missing[ENGINE_COUNT]);

#endif
