/* What the claim says about a host this box holds. After its admission the
 * box writes what is true of the host, by compare-and-swap and only while the
 * claim still describes that admission: parked after a park, failed (with
 * the reason, the message and the attempts) after a wake gave up, and during
 * a swap that failed, the generation that serves on. Publication itself is
 * the wake's own write (wake/publish.c).
 *
 * hosts/transitions.c reports what a transition made true, and settles the
 * report when the wake or retirement ended; the write then runs off the loop's callbacks,
 * one at a time per host. Another writer always wins: a write that finds the
 * claim moved past our admission (a newer session, another box, an operator's
 * op) leaves it as it is. The next wake's read, and the claim writes of a
 * swap, wait for the write in flight (ad_claim_report_defer), so a write-back
 * never races the admission that follows it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "activator/daemon/host/host.h"

/* ours is the claim as our admission left it in the store: the admission of
 * a wake (holder.session, generation, revision), its publication, or the
 * claim a resumed generation was adopted under. Write-backs compare with it. */
void ad_claim_report_admitted(ad_host *host, const claim *ours);

/* A wake or swap began: until it admits, nothing of an earlier admission is
 * this wake's to write. */
void ad_claim_report_wake_began(ad_host *host);

/* What the claim should say once the wake or retirement in flight ends; the
 * last report before ad_claim_report_settle is the one written. */
/* Nothing runs: phase parked, no handle. */
void ad_claim_report_parked(ad_host *host);
/* The admission does not serve: phase failed, no handle, and why. message
 * may be NULL (a generation that failed after it served). */
void ad_claim_report_failed(ad_host *host, pl_reason reason, const char *message,
                            unsigned attempts);
/* With the failed report just made: the pinned build failed in the wake
 * (failed names it, with its reason and message), so the pin records it too,
 * if the claim is still pinned to it. NULL: nothing. */
void ad_claim_report_pin_failure(ad_host *host, const claim_pin *failed);
/* generation serves on after a swap failed: named again as serving. */
void ad_claim_report_serving(ad_host *host, uint64_t generation);

/* The serving generation is frozen: phase frozen, its handle kept. A thaw
 * reports it serving again (ad_claim_report_serving). */
void ad_claim_report_frozen(ad_host *host);

/* The wake or retirement ended, or a freeze or thaw settled: writes what
 * was reported, if anything. */
void ad_claim_report_settle(ad_host *host);

/* True while a report of N serving again (a failed swap's) waits for its
 * settle. */
bool ad_claim_report_serving_due(const ad_host *host);

/* True from a report until its write ended. */
bool ad_claim_report_busy(const ad_host *host);

/* When host is busy, fn(userdata) runs once it is not (from the loop) and
 * true is returned; otherwise false, and the caller goes on at once. */
bool ad_claim_report_defer(ad_host *host, void (*fn)(void *userdata), void *userdata);

/* The claim watch found the store answering again after an outage: every
 * write-back waiting out its retry's delay (up to 5 s) is tried now, so the
 * claims say what is true as soon as the daemon says the store is back. */
void ad_claim_report_store_answers(ad_daemon *daemon);

/* Frees what is kept for host. The store must not call back any more (the
 * loop has ended), or nothing may be in flight. */
void ad_claim_report_free(ad_host *host);
