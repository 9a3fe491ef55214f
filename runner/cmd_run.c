/* cmd_run: placeholder until `sweep run` lands (replace this file). */
#include <stdio.h>

#include "commands.h"

int cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sweep: 'run' is not built yet\n");
    return RN_ERR_USAGE;
}
