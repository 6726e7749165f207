"""The local web page (`crosstalk ui`): the person sees and acts on what their agents say."""
