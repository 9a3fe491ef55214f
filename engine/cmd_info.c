/* cmd_info: placeholder until `fp4serve info` lands (replace this file). */
#include <stdio.h>

#include "fp4.h"

int cmd_info(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fp4serve: 'info' is not built yet\n");
    return FP_ERR_USAGE;
}
