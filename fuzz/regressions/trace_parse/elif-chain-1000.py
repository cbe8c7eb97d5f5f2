if x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
elif x:
    pass
