/*
 * libFuzzer target for the page validator: any bytes, any size, must give a
 * verdict (0 or a TH_PAGE_E* code) with a terminated reason, without reading
 * outside the buffer or any undefined behaviour (build with
 * -fsanitize=fuzzer,address,undefined). The input's first byte picks the
 * expectation (boot id known or not, time namespace, peer pid, "now").
 * Whole pages also go to th_page_adopt (a restarted daemon continuing a
 * stored page): it accepts exactly what the validator accepts but for the
 * heartbeat and VALID, with the publisher's tick and counter kind, and
 * writes nothing but the publisher's pid, frequency and start time.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "page.h"

static unsigned char buf[2 * TH_PAGE_SIZE] __attribute__((aligned(4096)));
static unsigned char copy[TH_PAGE_SIZE] __attribute__((aligned(4096)));

static void check_adopt(uint8_t sel, const struct th_page_expect *e)
{
	const struct th_page_hdr *h = (const struct th_page_hdr *)buf;
	struct th_page_ident id;
	memset(&id, 0, sizeof id);
	memcpy(id.boot_id, e->boot_id, sizeof id.boot_id);
	id.timens_mono_ns = e->have_timens ? e->timens_mono_ns : 0;
	id.timens_boot_ns = e->have_timens ? e->timens_boot_ns : 0;
	id.counter_kind = (sel & 16) ? h->counter_kind : 1;
	id.tick_ns = (sel & 32) ? h->tick_ns : 4000000;
	id.publisher_pid = 777;
	id.nominal_hz = 3000000000u;
	id.start_ns = 123456789;
	memcpy(copy, buf, TH_PAGE_SIZE);
	char reason[96];
	memset(reason, 'x', sizeof reason);
	int rc = th_page_adopt((struct th_page_hdr *)copy, &id, reason, sizeof reason);
	if (!memchr(reason, 0, sizeof reason))
		abort();
	/* the validator's verdict on the same page, without the liveness */
	struct th_page_expect x;
	memset(&x, 0, sizeof x);
	memcpy(x.boot_id, id.boot_id, sizeof x.boot_id);
	x.counter_kind = id.counter_kind;
	x.have_timens = 1;
	x.timens_mono_ns = id.timens_mono_ns;
	x.timens_boot_ns = id.timens_boot_ns;
	char r2[96];
	int v = th_page_validate(buf, TH_PAGE_SIZE, &x, r2, sizeof r2);
	int valid_flag = (atomic_load(&h->flags) & TH_PAGE_VALID) != 0;
	int ok = (v == 0 || (v == TH_PAGE_ESTALE && !valid_flag)) && h->counter_kind == id.counter_kind &&
		 h->tick_ns == id.tick_ns;
	if ((rc == 0) != ok)
		abort();
	struct th_page_hdr *c = (struct th_page_hdr *)copy;
	if (rc == 0) {
		if (c->publisher_pid != id.publisher_pid || c->nominal_hz != id.nominal_hz || c->start_ns != id.start_ns)
			abort();
		c->publisher_pid = h->publisher_pid;
		c->nominal_hz = h->nominal_hz;
		c->start_ns = h->start_ns;
	}
	if (memcmp(copy, buf, TH_PAGE_SIZE) != 0)
		abort(); /* nothing else written, and nothing at all on a refusal */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	uint8_t sel = data[0];
	data++;
	size--;
	size_t n = size < sizeof buf ? size : sizeof buf;
	memset(buf, 0, sizeof buf);
	memcpy(buf, data, n);
	/* Mostly full pages (the interesting case), sometimes the raw size. */
	size_t len = (sel & 1) ? n : TH_PAGE_SIZE;
	/* Keep the magic and ABI right half of the time, so the fuzzer gets
	 * past them into the layout and the record. */
	if (sel & 2) {
		struct th_page_hdr *h = (struct th_page_hdr *)buf;
		h->magic = TH_PAGE_MAGIC;
		h->abi = TH_PAGE_ABI;
		if (sel & 4) {
			h->page_size = TH_PAGE_SIZE;
			h->header_size = TH_PAGE_HDR_SIZE;
			h->timeline_size = sizeof(struct th_timeline);
			h->ring = TH_RING;
			h->record_size = sizeof(struct th_rec);
			memset(h->reserved0, 0, sizeof h->reserved0);
			memset(h->reserved1, 0, sizeof h->reserved1);
		}
	}
	struct th_page_expect e;
	memset(&e, 0, sizeof e);
	e.counter_kind = 1;
	if (sel & 8)
		memcpy(e.boot_id, data + (n > 16 ? n - 16 : 0), n >= 16 ? 16 : 0);
	if (sel & 16)
		e.now_mono_ns = ((struct th_page_hdr *)buf)->heartbeat + (sel & 32 ? 100000000u : 0);
	if (sel & 64) {
		e.have_timens = 1;
		e.timens_mono_ns = (int64_t)sel << 20;
	}
	if (sel & 128)
		e.peer_pid = 4242;
	char reason[96];
	memset(reason, 'x', sizeof reason);
	int rc = th_page_validate(buf, len, (sel & 3) == 3 ? NULL : &e, reason, sizeof reason);
	if (rc != 0 && rc != TH_PAGE_EFORMAT && rc != TH_PAGE_ESTALE && rc != TH_PAGE_EOTHER)
		abort();
	if (!memchr(reason, 0, sizeof reason))
		abort();
	if (len == TH_PAGE_SIZE)
		check_adopt(sel, &e);
	if (rc == 0) {
		/* A page the validator accepts must also pass the cheap check
		 * at the same "now". */
		if (e.now_mono_ns && (sel & 3) != 3 &&
		    th_page_live((const struct th_page_hdr *)buf, e.now_mono_ns, 0, reason, sizeof reason) != 0)
			abort();
	}
	return 0;
}
