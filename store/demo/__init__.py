"""The demo session directory: its builder (:mod:`store.demo.build`), model, story and prose."""
