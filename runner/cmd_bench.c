/* cmd_bench: placeholder until `sweep bench` lands (replace this file). */
#include <stdio.h>

#include "commands.h"

int cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sweep: 'bench' is not built yet\n");
    return RN_ERR_USAGE;
}
