/* cmd_serve: placeholder until `fp4serve serve` lands (replace this file). */
#include <stdio.h>

#include "fp4.h"

int cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fp4serve: 'serve' is not built yet\n");
    return FP_ERR_USAGE;
}
