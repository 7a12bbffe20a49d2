"""The front end: one file's text in, its sites out.

Every command starts here. The bytes are decoded and parsed once
(:mod:`.source`; a notebook's code cells joined first, :mod:`.notebook`; a
file that does not parse is mended where it can be, :mod:`.repair`), the
lines that can hold a site are picked by text (:mod:`.prefilter`), imports and
scopes are read by one resolver (:mod:`.resolver`), and the finder
(:mod:`.finder`) classifies each call against the rule table
(:mod:`.classify`). It also reads the wrapped forms back (:mod:`.wrapped`,
:mod:`.statements`) and the suppression comments (:mod:`.suppress`), names
the sites (:mod:`.naming`), and marks the ones ``wrap`` must leave, with the
reason (:mod:`.unwrappable`). Run evidence, a recorded run's lines found
again in today's text (:mod:`.evidence`), comes in here too: it tells the
finder which lines a run saw crossing.

Nothing here imports the value layer (it plugs itself into the finder), the
codemod, the project scan or the findings.
"""
