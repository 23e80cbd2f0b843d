"""English function words, left out of keyword recall queries.

A word such as "me", "is" or "what" is in most memories, so a keyword search that counts it finds
every memory a little relevant and outranks the one memory that shares the question's meaning but
not its small words. BM25 gives such words a low weight but not none, enough to outrank a memory
holding none of them, so they are dropped from the query instead. Memories are indexed unchanged:
a query made only of these words still searches for them.
"""

from __future__ import annotations

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren as at be because been before
    being below between both but by can cannot could couldn d did didn do does doesn doing don done
    down during each either else ever every few for from further get gets got had hadn has hasn have
    haven having he her here hers herself him himself his how i if in into is isn it its itself just
    let ll m me might more most much must mustn my myself need no nor not now of off on once one only
    or other ought our ours ourselves out over own re s same shall shan she should shouldn so some
    such t than that the their theirs them themselves then there these they this those through to
    too under until up upon us ve very was wasn we were weren what whatever when whenever where
    whether which while who whom whose why will with won would wouldn yes yet you your yours
    yourself yourselves
    """.split()  # noqa: SIM905 -- a word list reads better than 180 quoted strings
)
