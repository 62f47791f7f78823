/*
 * libFuzzer target for the page validator: any bytes, any size, must give a
 * verdict (0 or a TH_PAGE_E* code) with a terminated reason, without reading
 * outside the buffer or any undefined behaviour (build with
 * -fsanitize=fuzzer,address,undefined). The input's first byte picks the
 * expectation (boot id known or not, time namespace, peer pid, "now").
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "page.h"

static unsigned char buf[2 * TH_PAGE_SIZE] __attribute__((aligned(4096)));

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
	if (rc == 0) {
		/* A page the validator accepts must also pass the cheap check
		 * at the same "now". */
		if (e.now_mono_ns && (sel & 3) != 3 &&
		    th_page_live((const struct th_page_hdr *)buf, e.now_mono_ns, 0, reason, sizeof reason) != 0)
			abort();
	}
	return 0;
}
