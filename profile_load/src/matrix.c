#include <stddef.h>

#include "matrix.h"

const char *const engine_names[ENGINE_COUNT] = {"innodb", "myisam", "aria", "memory"};
const char *const binlog_names[BINLOG_COUNT] = {"off", "statement", "mixed", "row"};
const char *const api_names[API_COUNT] = {"text", "prepared", "cursor", "nonblocking"};

const char *const engine_sql[ENGINE_COUNT] = {"InnoDB", "MyISAM", "Aria", "MEMORY"};
/* "off" leaves the format alone: sql_log_bin=0 is what turns logging off. */
const char *const binlog_sql[BINLOG_COUNT] = {NULL, "STATEMENT", "MIXED", "ROW"};
