"""A tenant's dead letters behind the admin API's routes: where they sit and how they are listed (``letters``), what a
person sees of one (``view``), its replay (``replay``), which letters a caller may act on (``scope``) and the service
the routes call (``service``). Here because only the admin API lists and replays them (it holds the tenant check, the
audit and the publisher); the stages that refused the records are other deployables. See docs/dead-letters.md."""
