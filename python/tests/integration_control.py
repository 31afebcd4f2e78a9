"""Control-entry check run by test/python_test.go against a real mount.

Usage: integration_control.py MOUNTPOINT JOB

Ends JOB with dsmount.end_job (twice: the second must find nothing), lists
the jobs left with dsmount.stats, and declares an order naming no file of
the mount, which the daemon must refuse with a DsmountError. Prints one JSON
object: {"ended", "ended_again", "jobs", "refused"}.
"""

import json
import sys

import dsmount


def main():
    mp, job = sys.argv[1], sys.argv[2]
    ended = dsmount.end_job(mp, job)
    ended_again = dsmount.end_job(mp, job)
    jobs = [j["name"] for j in dsmount.stats(mp)["mount"]["jobs"] or []]
    try:
        dsmount.declare_order(mp, job + "-bad", 0, ["no/such/file.bin"])
        refused = ""
    except dsmount.DsmountError as e:
        refused = str(e)
    json.dump({"ended": ended, "ended_again": ended_again, "jobs": jobs, "refused": refused}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
