"""What is left of the old ops package: the room admin ops (``room_admin_ops``), whose feature
(``FEATURE``) is listed in :data:`crosstalk.features.registry.FEATURES` like every other. They
move into a feature package once the membership fixes in them have landed."""
