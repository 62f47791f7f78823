/* The simulation's virtual timehandsd (vdaemon.c). */
#ifndef TH_SIM_VDAEMON_H
#define TH_SIM_VDAEMON_H

#include <stdint.h>

/* adopt: continue the page in place (0 when adopted, else a new page);
 * lag_ns: its readings of the fine clocks, and so its lines, lag the
 * kernel's that much. */
int vd_init(uint64_t tick_ns, double nominal_hz, int adopt, int64_t lag_ns);
void vd_windup(void);
void vd_kill(void);

#endif
