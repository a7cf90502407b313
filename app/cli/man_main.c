/* man_main.c: prints xjoin's manual page (options_man), built from the
 * option table at build time into xjoin.1, so it never drifts. */
#include <stdio.h>

#include "options.h"

int main(void)
{
	options_man(stdout);
	return ferror(stdout) ? 1 : 0;
}
