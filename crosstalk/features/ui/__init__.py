"""The local web page (`crosstalk ui`): the person sees and acts on what their agents say."""

from crosstalk.features.feature import Feature
from crosstalk.features.ui.ops import plug

FEATURE = Feature("ui", plug)
