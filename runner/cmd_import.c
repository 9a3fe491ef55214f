/* cmd_import: placeholder until `sweep import` lands (replace this file). */
#include <stdio.h>

#include "commands.h"

int cmd_import(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sweep: 'import' is not built yet\n");
    return RN_ERR_USAGE;
}
